"""``python -m contextledger``: the same command line as the ``contextledger`` script."""

from contextledger.cli.main import main

if __name__ == "__main__":
    main()
