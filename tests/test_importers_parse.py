"""Tests for the transcript importers' parse layer (contextledger.ingest.importers).

Every supported file of /work/shared/data/real is parsed and its message, tool-call and
tool-result counts are compared with a table derived once from the importer and checked
by hand on four files:

* ``marot-spotter/short.jsonl`` (15 lines): 1 snapshot + 2 system lines (3 meta), 3
  progress, the user prompt, 5 assistant records sharing ``msg_…YiiQa`` merged into one
  turn (text, thinking, text, tool_use, tool_use), 2 tool_result records, 1 user text
  ("[Request interrupted by user]") → 11 messages, 2 calls, 2 results.
* ``tau-bench-airline-gpt4o/task002_trial1_idx052.json``: traj roles 30 assistant, 27 tool,
  4 user, 1 system; 27 ``tool_calls`` entries.
* ``adp-swe-smith/arrow-py…nuzjfyur.json``: 31 messages s,u,(a,u)×14,a: 15 assistant
  turns each ending in a ``<function=…>`` block, 14 observations after them.
* ``adp-nebius-swe-agent/marshmallow-code__apispec-811_21.json``: 11 turns system, user,
  (ai, user)×4, ai; 5 fenced commands, 4 observations.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import real_data_dir, require_real_data
from contextledger.errors import ImportFormatError
from contextledger.ingest.importers import SUPPORTED_FORMATS, detect_format, parse_file
from contextledger.ingest.transcript import ImportedMessage, ImportedTranscript
from contextledger.records.enums import MessageKind, Role, RuntimeKind
from contextledger.records.parts import (
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

require_real_data()  # every test here reads ../shared/data/real: skip (or fail in CI) without it

REAL = real_data_dir()
MANIFEST: list[dict[str, Any]] = json.loads((REAL / "manifest.json").read_text())
BY_PATH = {entry["path"]: entry for entry in MANIFEST}
CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

# path -> (messages, tool calls, tool results, "role/kind=count …") over the whole transcript
# (for a Claude Code main session this includes its folded subagent files).
EXPECTED: dict[str, tuple[int, int, int, str]] = {
    "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl": (1518, 183, 183, "assistant/chat=152 system/meta=20 system/progress=1153 tool/chat=183 user/chat=5 user/compaction=1 user/meta=4"),
    "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl": (116, 33, 33, "assistant/chat=12 system/progress=70 tool/chat=33 user/chat=1"),
    "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl": (5, 0, 0, "assistant/chat=1 user/chat=1 user/meta=3"),
    "marot-spotter/6c2214d7-b87e-4432-8e41-22ba294ea584/subagents/agent-afc096d.jsonl": (151, 48, 48, "assistant/chat=18 system/progress=84 tool/chat=48 user/chat=1"),
    "marot-spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": (1577, 196, 196, "assistant/chat=157 system/meta=17 system/progress=1196 tool/chat=196 user/chat=4 user/compaction=1 user/meta=6"),
    "marot-spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl": (112, 19, 19, "assistant/chat=13 system/progress=79 tool/chat=19 user/chat=1"),
    "marot-spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl": (7, 0, 0, "assistant/chat=1 user/chat=1 user/meta=5"),
    "marot-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": (2224, 254, 254, "assistant/chat=221 system/meta=31 system/progress=1709 tool/chat=254 user/chat=6 user/compaction=1 user/meta=2"),
    "marot-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl": (28, 12, 12, "assistant/chat=3 system/progress=12 tool/chat=12 user/chat=1"),
    "marot-spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-acompact-946d2b.jsonl": (2, 0, 0, "assistant/chat=1 user/chat=1"),
    "marot-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl": (1907, 243, 243, "assistant/chat=178 system/meta=33 system/progress=1432 tool/chat=243 user/chat=6 user/compaction=1 user/meta=14"),
    "marot-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46/subagents/agent-a93ccab.jsonl": (91, 25, 25, "assistant/chat=11 system/progress=54 tool/chat=25 user/chat=1"),
    "marot-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46/subagents/agent-aa84377.jsonl": (77, 21, 21, "assistant/chat=9 system/progress=46 tool/chat=21 user/chat=1"),
    "marot-spotter/fa812bfe-b295-4cca-9c2f-fdf01028cb46/subagents/agent-acompact-70d8e7.jsonl": (15, 0, 0, "assistant/chat=1 user/chat=1 user/meta=13"),
    "marot-spotter/short.jsonl": (11, 2, 2, "assistant/chat=1 system/meta=3 system/progress=3 tool/chat=2 user/chat=2"),
    "marot-spotter/subagent.jsonl": (80, 16, 16, "assistant/chat=12 system/meta=4 system/progress=44 tool/chat=16 user/chat=3 user/meta=1"),
    "marot-spotter/tool_heavy.jsonl": (34, 6, 6, "assistant/chat=4 system/meta=5 system/progress=10 tool/chat=6 user/chat=6 user/meta=3"),
    "claude-code-viewer-dkimuson/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": (21, 12, 12, "assistant/chat=7 tool/chat=12 user/chat=1 user/meta=1"),
    "claude-code-viewer-dkimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": (45, 21, 21, "assistant/chat=20 tool/chat=21 user/chat=3 user/meta=1"),
    "claude-code-viewer-dkimuson/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": (346, 167, 167, "assistant/chat=170 system/summary=1 tool/chat=167 user/chat=7 user/meta=1"),
    "claude-reliability-snapshots/coverage-test-fix.jsonl": (31, 13, 13, "assistant/chat=14 tool/chat=13 user/chat=1 user/meta=3"),
    "claude-reliability-snapshots/python-to-rust-port.jsonl": (81, 39, 39, "assistant/chat=39 tool/chat=39 user/chat=1 user/meta=2"),
    "claude-reliability-snapshots/stop-hook-reflection-first-stop.jsonl": (13, 4, 4, "assistant/chat=6 tool/chat=4 user/chat=1 user/meta=2"),
    "moredip-session-share/general-tool-calls.jsonl": (300, 65, 64, "assistant/chat=56 system/meta=17 system/progress=127 system/summary=4 tool/chat=64 user/chat=20 user/meta=12"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl": (102, 12, 12, "assistant/chat=21 system/meta=21 system/progress=11 system/summary=1 tool/chat=12 user/chat=18 user/meta=18"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-a5bdbc1.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-a9cad17.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-aa5ef13.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-ac27727.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/subagents/agent-afbbf75.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "moredip-session-share/samples/4b2030ed-5563-49ea-b703-6a002f2d3cc8.jsonl": (16, 2, 2, "assistant/chat=4 system/meta=2 system/progress=6 tool/chat=2 user/chat=2"),
    "moredip-session-share/samples/4b2030ed-5563-49ea-b703-6a002f2d3cc8/subagents/agent-a2018e5.jsonl": (6, 1, 1, "assistant/chat=2 system/progress=2 tool/chat=1 user/chat=1"),
    "randlee-claude-history/simple/agents/agent-aae161c.jsonl": (90, 22, 22, "assistant/chat=21 system/progress=46 tool/chat=22 user/chat=1"),
    "randlee-claude-history/simple/agents/agent-acompact-a94287.jsonl": (3, 0, 0, "assistant/chat=1 user/chat=1 user/observation=1"),
    "randlee-claude-history/simple/agents/agent-aprompt_suggestion-aafb27.jsonl": (3, 0, 0, "assistant/chat=2 user/chat=1"),
    "randlee-claude-history/simple/session.jsonl": (469, 90, 89, "assistant/chat=80 system/meta=31 system/progress=241 system/summary=1 tool/chat=89 user/chat=19 user/compaction=1 user/meta=7"),
    "randlee-claude-history/subagents-example/agents/agent-a41f3dc.jsonl": (192, 46, 46, "assistant/chat=31 system/progress=114 tool/chat=46 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-a45ee2a.jsonl": (118, 27, 27, "assistant/chat=20 system/progress=70 tool/chat=27 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-a53b173.jsonl": (33, 9, 9, "assistant/chat=5 system/progress=18 tool/chat=9 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-a546a1b.jsonl": (68, 16, 16, "assistant/chat=10 system/progress=41 tool/chat=16 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-a5e7369.jsonl": (277, 66, 66, "assistant/chat=64 system/progress=146 tool/chat=66 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-aabf2dd.jsonl": (469, 119, 119, "assistant/chat=71 system/progress=278 tool/chat=119 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-abae753.jsonl": (310, 69, 69, "assistant/chat=64 system/progress=176 tool/chat=69 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-acompact-53a066.jsonl": (3, 0, 0, "assistant/chat=1 user/chat=1 user/observation=1"),
    "randlee-claude-history/subagents-example/agents/agent-af56ab9.jsonl": (127, 31, 31, "assistant/chat=23 system/progress=72 tool/chat=31 user/chat=1"),
    "randlee-claude-history/subagents-example/agents/agent-aprompt_suggestion-c749b4.jsonl": (20, 6, 6, "assistant/chat=6 system/progress=6 tool/chat=6 user/chat=1 user/compaction=1"),
    "codemie-code/claude-code/incremental-subagents/turn-2.jsonl": (59, 34, 34, "assistant/chat=17 system/meta=4 system/progress=1 system/summary=1 tool/chat=34 user/chat=2"),
    "codemie-code/claude-code/incremental-subagents/turn-2/subagents/agent-a485154.jsonl": (28, 20, 20, "assistant/chat=6 system/progress=1 tool/chat=20 user/chat=1"),
    "codemie-code/claude-code/session-196820da.jsonl": (147, 65, 65, "assistant/chat=47 system/meta=15 tool/chat=65 user/chat=15 user/meta=5"),
    "codemie-code/claude-code/session-3fe1b6bc.jsonl": (170, 76, 76, "assistant/chat=67 system/meta=10 tool/chat=76 user/chat=10 user/meta=7"),
    "codemie-code/claude-code/session-624a4a58.jsonl": (145, 48, 48, "assistant/chat=55 system/meta=19 tool/chat=48 user/chat=19 user/compaction=1 user/meta=3"),
    "codemie-code/claude-code/session-9eda1058.jsonl": (33, 3, 3, "assistant/chat=5 system/meta=5 system/summary=16 tool/chat=3 user/chat=4"),
    "swe-agent/ctf__crypto__BabyEncryption.traj": (32, 0, 0, "assistant/chat=15 system/chat=1 user/chat=1 user/observation=15"),
    "swe-agent/ctf__crypto__BabyTimeCapsule.traj": (20, 0, 0, "assistant/chat=9 system/chat=1 user/chat=1 user/observation=9"),
    "swe-agent/ctf__crypto__eps.traj": (30, 0, 0, "assistant/chat=14 system/chat=1 user/chat=1 user/observation=14"),
    "swe-agent/ctf__crypto__katy.traj": (38, 0, 0, "assistant/chat=18 system/chat=1 user/chat=1 user/observation=18"),
    "swe-agent/ctf__forensics__flash.traj": (10, 0, 0, "assistant/chat=4 system/chat=1 user/chat=1 user/observation=4"),
    "swe-agent/ctf__misc__networking_1.traj": (10, 0, 0, "assistant/chat=4 system/chat=1 user/chat=1 user/observation=4"),
    "swe-agent/ctf__pwn__warmup.traj": (16, 0, 0, "assistant/chat=7 system/chat=1 user/chat=1 user/observation=7"),
    "swe-agent/ctf__rev__rock.traj": (26, 0, 0, "assistant/chat=12 system/chat=1 user/chat=1 user/observation=12"),
    "swe-agent/ctf__web__i_got_id_demo.traj": (44, 0, 0, "assistant/chat=21 system/chat=1 user/chat=1 user/observation=21"),
    "swe-agent/function_calling_simple.traj": (12, 5, 5, "assistant/chat=5 system/chat=1 tool/chat=5 user/chat=1"),
    "swe-agent/human_thought__swe-bench-HumanEvalFix-python__lcb__t-0.00__p-0.95__c-4.00__install-0__humanevalfix-python-0.traj": (12, 0, 0, "assistant/chat=5 system/chat=1 user/chat=1 user/observation=5"),
    "swe-agent/replay__marshmallow-code__marshmallow-1867__default__t-0.20__p-0.95__c-2.00__install-1___install_from_source__marshmallow-code__marshmallow-1867.traj": (30, 0, 0, "assistant/chat=14 system/chat=1 user/chat=1 user/observation=14"),
    "swe-agent/replay__marshmallow-code__marshmallow-1867__default_sys-env_cursors_window100__t-0.20__p-0.95__c-2.00__install-1__marshmallow-code__marshmallow-1867.traj": (26, 0, 0, "assistant/chat=12 system/chat=1 user/chat=1 user/observation=12"),
    "swe-agent/replay__marshmallow-code__marshmallow-1867__function_calling__install-1__marshmallow-code__marshmallow-1867.traj": (24, 11, 11, "assistant/chat=11 system/chat=1 tool/chat=11 user/chat=1"),
    "swe-agent/replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source__marshmallow-code__marshmallow-1867.traj": (28, 13, 13, "assistant/chat=13 system/chat=1 tool/chat=13 user/chat=1"),
    "swe-agent/test_data__gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__6e44b9__sweagenttestrepo-1c2844.traj": (10, 4, 4, "assistant/chat=4 system/chat=1 tool/chat=4 user/chat=1"),
    "swe-agent/test_data__gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__swe-agent__test-repo-i1.traj": (13, 0, 0, "assistant/chat=5 system/chat=1 user/chat=2 user/observation=5"),
    "swe-agent/test_data__gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1__pydicom__pydicom-1458.traj": (27, 0, 0, "assistant/chat=12 system/chat=1 user/chat=2 user/observation=12"),
    "mini-swe-agent-deepseek/bench1__astropy__astropy-12907.traj.json": (75, 36, 36, "assistant/chat=36 system/chat=1 system/meta=1 tool/chat=36 user/chat=1"),
    "mini-swe-agent-deepseek/bench1__django__django-11620.traj.json": (237, 117, 117, "assistant/chat=117 system/chat=1 system/meta=1 tool/chat=117 user/chat=1"),
    "mini-swe-agent-deepseek/bench1__django__django-12453.traj.json": (87, 42, 42, "assistant/chat=42 system/chat=1 system/meta=1 tool/chat=42 user/chat=1"),
    "mini-swe-agent-deepseek/bench1__django__django-14752.traj.json": (65, 31, 31, "assistant/chat=31 system/chat=1 system/meta=1 tool/chat=31 user/chat=1"),
    "mini-swe-agent-deepseek/bench_dev__pydicom__pydicom-1256.traj.json": (101, 49, 49, "assistant/chat=49 system/chat=1 system/meta=1 tool/chat=49 user/chat=1"),
    "mini-swe-agent-deepseek/lite_dev__sqlfluff__sqlfluff-2419.traj.json": (85, 41, 41, "assistant/chat=41 system/chat=1 system/meta=1 tool/chat=41 user/chat=1"),
    "mini-swe-agent-deepseek/reasoner_dev__pvlib__pvlib-python-1072.traj.json": (33, 15, 15, "assistant/chat=15 system/chat=1 system/meta=1 tool/chat=15 user/chat=1"),
    "mini-swe-agent-deepseek/reasoner_dev__pvlib__pvlib-python-1606.traj.json": (11, 4, 4, "assistant/chat=4 system/chat=1 system/meta=1 tool/chat=4 user/chat=1"),
    "mini-swe-agent-deepseek/reasoner_dev__pvlib__pvlib-python-1707.traj.json": (35, 16, 16, "assistant/chat=16 system/chat=1 system/meta=1 tool/chat=16 user/chat=1"),
    "tau-bench-airline-gpt4o/task002_trial1_idx052.json": (62, 27, 27, "assistant/chat=30 system/chat=1 tool/chat=27 user/chat=4"),
    "tau-bench-airline-gpt4o/task002_trial2_idx102.json": (38, 13, 13, "assistant/chat=18 system/chat=1 tool/chat=13 user/chat=6"),
    "tau-bench-airline-gpt4o/task003_trial0_idx003.json": (62, 20, 20, "assistant/chat=30 system/chat=1 tool/chat=20 user/chat=11"),
    "tau-bench-airline-gpt4o/task003_trial1_idx053.json": (48, 14, 14, "assistant/chat=23 system/chat=1 tool/chat=14 user/chat=10"),
    "tau-bench-airline-gpt4o/task008_trial1_idx058.json": (44, 16, 16, "assistant/chat=21 system/chat=1 tool/chat=16 user/chat=6"),
    "tau-bench-airline-gpt4o/task009_trial2_idx109.json": (62, 23, 23, "assistant/chat=30 system/chat=1 tool/chat=23 user/chat=8"),
    "tau-bench-airline-gpt4o/task011_trial2_idx111.json": (38, 14, 14, "assistant/chat=18 system/chat=1 tool/chat=14 user/chat=5"),
    "tau-bench-airline-gpt4o/task013_trial0_idx013.json": (58, 14, 14, "assistant/chat=28 system/chat=1 tool/chat=14 user/chat=15"),
    "tau-bench-airline-gpt4o/task016_trial3_idx166.json": (36, 11, 11, "assistant/chat=17 system/chat=1 tool/chat=11 user/chat=7"),
    "tau-bench-airline-gpt4o/task017_trial3_idx167.json": (42, 12, 12, "assistant/chat=20 system/chat=1 tool/chat=12 user/chat=9"),
    "tau-bench-airline-gpt4o/task025_trial3_idx175.json": (48, 14, 14, "assistant/chat=23 system/chat=1 tool/chat=14 user/chat=10"),
    "tau-bench-airline-gpt4o/task028_trial1_idx078.json": (38, 15, 15, "assistant/chat=18 system/chat=1 tool/chat=15 user/chat=4"),
    "tau-bench-airline-gpt4o/task033_trial0_idx033.json": (62, 23, 23, "assistant/chat=30 system/chat=1 tool/chat=23 user/chat=8"),
    "tau-bench-airline-gpt4o/task033_trial2_idx133.json": (62, 20, 20, "assistant/chat=30 system/chat=1 tool/chat=20 user/chat=11"),
    "tau-bench-airline-gpt4o/task034_trial0_idx034.json": (34, 12, 12, "assistant/chat=16 system/chat=1 tool/chat=12 user/chat=5"),
    "tau-bench-airline-gpt4o/task046_trial3_idx196.json": (62, 18, 18, "assistant/chat=30 system/chat=1 tool/chat=18 user/chat=13"),
    "adp-swe-gym-openhands/Project-MONAI__MONAI-3715_4.json": (61, 29, 28, "assistant/chat=30 system/chat=1 tool/chat=28 user/chat=2"),
    "adp-swe-gym-openhands/Project-MONAI__MONAI-5686_4.json": (23, 9, 8, "assistant/chat=11 system/chat=1 tool/chat=8 user/chat=3"),
    "adp-swe-gym-openhands/Project-MONAI__MONAI-6849_1.json": (26, 11, 10, "assistant/chat=12 system/chat=1 tool/chat=10 user/chat=3"),
    "adp-swe-gym-openhands/getmoto__moto-6387_0.json": (37, 17, 16, "assistant/chat=18 system/chat=1 tool/chat=16 user/chat=2"),
    "adp-swe-gym-openhands/python__mypy-15976_0.json": (41, 21, 20, "assistant/chat=17 system/chat=1 tool/chat=20 user/chat=3"),
    "adp-swe-smith/arrow-py__arrow.1d70d009.lm_rewrite__nuzjfyur.json": (31, 0, 0, "assistant/chat=15 system/chat=1 user/chat=1 user/observation=14"),
    "adp-swe-smith/getmoto__moto.694ce1f4.pr_6055.json": (77, 0, 0, "assistant/chat=38 system/chat=1 user/chat=1 user/observation=37"),
    "adp-swe-smith/pudo__dataset.5c2dc8d3.func_pm_op_change__fq79104s.json": (47, 0, 0, "assistant/chat=23 system/chat=1 user/chat=1 user/observation=22"),
    "adp-swe-smith/pyutils__line_profiler.a646bf0f.100.json": (45, 0, 0, "assistant/chat=22 system/chat=1 user/chat=1 user/observation=21"),
    "adp-swe-smith/sqlfluff__sqlfluff.50a1c4b6.lm_rewrite__5n2sn94d.json": (37, 0, 0, "assistant/chat=18 system/chat=1 user/chat=1 user/observation=17"),
    "adp-swe-play-openhands/swe-play-0.json": (43, 0, 0, "assistant/chat=21 system/chat=1 user/chat=1 user/observation=20"),
    "adp-swe-play-openhands/swe-play-1.json": (45, 0, 0, "assistant/chat=22 system/chat=1 user/chat=1 user/observation=21"),
    "adp-swe-play-openhands/swe-play-2.json": (65, 0, 0, "assistant/chat=32 system/chat=1 user/chat=1 user/observation=31"),
    "adp-swe-play-openhands/swe-play-3.json": (43, 0, 0, "assistant/chat=21 system/chat=1 user/chat=1 user/observation=20"),
    "adp-swe-play-openhands/swe-play-4.json": (65, 0, 0, "assistant/chat=32 system/chat=1 user/chat=1 user/observation=31"),
    "adp-nebius-swe-agent/ReviewNB__treon-25_38.json": (34, 0, 0, "assistant/chat=16 system/chat=1 user/chat=1 user/observation=16"),
    "adp-nebius-swe-agent/brightway-lca__brightway2-analyzer-19_23.json": (18, 0, 0, "assistant/chat=8 system/chat=1 user/chat=1 user/observation=8"),
    "adp-nebius-swe-agent/marshmallow-code__apispec-811_21.json": (12, 0, 0, "assistant/chat=5 system/chat=1 user/chat=1 user/observation=5"),
    "adp-nebius-swe-agent/tempoCollaboration__OQuPy-74_55.json": (30, 0, 0, "assistant/chat=14 system/chat=1 user/chat=1 user/observation=14"),
    "adp-nebius-swe-agent/tomerfiliba__plumbum-366_17.json": (14, 0, 0, "assistant/chat=6 system/chat=1 user/chat=1 user/observation=6"),
    "codemie-code/codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": (313, 105, 105, "assistant/chat=66 developer/chat=1 system/chat=1 system/meta=3 system/progress=134 tool/chat=105 user/chat=3"),
    "codemie-code/codex/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl": (63, 38, 38, "assistant/chat=20 system/chat=1 system/meta=1 tool/chat=38 user/chat=3"),
    "aider-chat-history/afi-core.aider.chat.history.md": (485, 37, 37, "assistant/chat=40 system/meta=367 tool/chat=37 user/chat=40 user/observation=1"),
    "aider-chat-history/mozgoslav.aider.chat.history.md": (146, 2, 2, "assistant/chat=16 system/meta=117 tool/chat=2 user/chat=11"),
}


def _counts(transcript: ImportedTranscript) -> tuple[int, int, int, str]:
    calls = sum(isinstance(p, ToolCallPart) for m in transcript.messages for p in m.parts)
    results = sum(isinstance(p, ToolResultPart) for m in transcript.messages for p in m.parts)
    kinds = collections.Counter(f"{m.role.value}/{m.kind.value}" for m in transcript.messages)
    text = " ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
    return len(transcript.messages), calls, results, text


def _by_key(transcript: ImportedTranscript) -> dict[str, ImportedMessage]:
    return {m.key: m for m in transcript.messages}


def _path_to(transcript: ImportedTranscript, key: str) -> list[str]:
    """Keys from the root to ``key`` following parent_key."""
    index = _by_key(transcript)
    out: list[str] = []
    current: str | None = key
    while current is not None:
        out.append(current)
        current = index[current].parent_key
    return list(reversed(out))


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _cc(uuid: str, parent: str | None, rtype: str, content: Any, ts: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": rtype, "content": content}
    if "mid" in extra:
        message["id"] = extra.pop("mid")
        message["model"] = "claude-test"
    return {"type": rtype, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "timestamp": ts,
            "isSidechain": False, "message": message, **extra}


# --------------------------------------------------------------------------- real files


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_real_file_counts_and_invariants(rel: str) -> None:
    path = REAL / rel
    assert detect_format(path) == BY_PATH[rel]["format"]
    transcript = parse_file(path)
    assert transcript.format == BY_PATH[rel]["format"]
    assert _counts(transcript) == EXPECTED[rel]
    keys = [m.key for m in transcript.messages]
    assert len(keys) == len(set(keys))
    seen: set[str] = set()
    calls: set[str] = set()
    for message in transcript.messages:
        if message.parent_key is not None:
            assert message.parent_key in seen, (message.key, message.parent_key)
        seen.add(message.key)
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                assert CALL_ID.fullmatch(part.call_id)
                assert part.call_id not in calls
                calls.add(part.call_id)
                assert message.role is Role.ASSISTANT
            if isinstance(part, ToolResultPart):
                assert part.call_id in calls
                assert message.role is Role.TOOL and len(message.parts) == 1
            if isinstance(part, TextPart):
                assert "base64," not in part.text[:200]
    assert transcript.content_key.startswith("sha256:")
    assert transcript.tree is (transcript.format in ("claude-code", "gemini-cli"))
    if transcript.tree:
        assert transcript.active_leaf_key in seen


def _own_calls(transcript: ImportedTranscript) -> int:
    """Tool calls written in the main file (Claude Code locations of folded files carry
    the subagent file name before "line")."""
    return sum(
        isinstance(p, ToolCallPart)
        for m in transcript.messages
        if m.source_ref.startswith("line ") or not transcript.tree
        for p in m.parts
    )


# Files where the manifest's counting rule differs from the neutral model (SOURCES.md
# "Counting rules"):
# * general-tool-calls.jsonl: the manifest counts every tool_use block, including the 45
#   that a resumed session wrote a second time (same message.id and timestamp, new uuid);
#   the importer keeps each repeated record once, so 110 - 45 = 65 calls remain.
# * ctf__crypto__BabyEncryption.traj: the manifest counts 16 ``trajectory`` steps, but the
#   ``history`` the model saw (which the importer prefers) holds 15 assistant turns.
# * swe-play-4.json: the manifest counts 32 assistant turns; the last one is written as
#   ``<finish>`` instead of ``<function=finish>``, so only 31 carry a parsable action.
# * afi-core.aider.chat.history.md: the manifest counts 27 "Applied edit" / "Running" lines
#   plus 8 other tool runs; the importer makes one call per edit block the replies hold
#   (an unconfirmed or failed block included: 27) and one per "Running" line (10).
# * mozgoslav.aider.chat.history.md: Aider "applied" a whole-file block to a prose line
#   ("-> Swift binary …") it took for a file name; a name with spaces is not one here.
MANIFEST_DIFFERENCES = {
    "aider-chat-history/afi-core.aider.chat.history.md": 37,
    "aider-chat-history/mozgoslav.aider.chat.history.md": 2,
    "moredip-session-share/general-tool-calls.jsonl": 65,
    "swe-agent/ctf__crypto__BabyEncryption.traj": 15,
    "adp-swe-play-openhands/swe-play-4.json": 31,
}


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_tool_calls_match_manifest(rel: str) -> None:
    """Structured formats: ToolCallParts == manifest ``tool_calls``.  Text-action formats
    (the manifest counts assistant turns / trajectory steps): assistant messages carrying
    ``metadata["action"]`` == manifest ``tool_calls``."""
    transcript = parse_file(REAL / rel)
    own = _own_calls(transcript)
    actions = sum(1 for m in transcript.messages if m.role is Role.ASSISTANT and "action" in m.metadata)
    assert own == 0 or actions == 0
    measured = own if own else actions
    assert measured == MANIFEST_DIFFERENCES.get(rel, BY_PATH[rel]["tool_calls"])


def test_every_manifest_format_is_supported() -> None:
    assert {e["format"] for e in MANIFEST} <= set(SUPPORTED_FORMATS)
    assert set(BY_PATH) == set(EXPECTED)


def test_recognised_unsupported_format_is_named(tmp_path: Path) -> None:
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    for path in (_jsonl(tmp_path / "events.jsonl", events), tmp_path / "events.json"):
        if path.suffix == ".json":
            path.write_text(json.dumps(events))
        with pytest.raises(ImportFormatError) as info:
            parse_file(path)
        assert info.value.reason == "OpenHands event stream (openhands-events) is recognised, but this format is not supported yet"


# --------------------------------------------------------------------------- Claude Code


def test_real_fork_and_active_branch() -> None:
    """0ccf1a04: after the turn_duration record ca0c65…, the user first continued with
    "/plugin" commands (b17705…), and later a record 03a754… ("are they still being
    written?") re-used the same parent.  The newest record (17356307…, "Done! …") descends
    from the first branch, which is therefore active."""
    transcript = parse_file(REAL / "moredip-session-share/samples/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl")
    children = collections.defaultdict(list)
    for m in transcript.messages:
        if m.participant_key == "main":
            children[m.parent_key].append(m.key)
    forks = {k: v for k, v in children.items() if len(v) > 1}
    assert list(forks.values()) == [["b17705eb-0b03-4d11-9999-6a1150926c56", "03a754e3-8604-4a5a-a094-4db5e24b577f"]]
    # the leaf is the session-title summary record written after the newest message
    assert transcript.active_leaf_key == "line:86"
    active = _path_to(transcript, "line:86")
    # records 6e5967cf… (thinking) and 17356307… (text) are one turn, keyed by the first
    last_turn = _by_key(transcript)[active[-2]]
    assert active[-2] == "6e5967cf-fb82-40bc-b935-d38d70667332"
    assert [type(p) for p in last_turn.parts] == [ThinkingPart, TextPart]
    final_text = last_turn.parts[1]
    assert isinstance(final_text, TextPart) and final_text.text.startswith("Done!")
    assert "b17705eb-0b03-4d11-9999-6a1150926c56" in active
    assert "03a754e3-8604-4a5a-a094-4db5e24b577f" not in active
    side = _by_key(transcript)["03a754e3-8604-4a5a-a094-4db5e24b577f"]
    assert side.parts == [TextPart(text="are they still being written?")]


def test_synthetic_fork_active_branch_follows_newest(tmp_path: Path) -> None:
    records = [
        _cc("u1", None, "user", "start", "2026-01-01T00:00:00Z"),
        _cc("a1", "u1", "assistant", [{"type": "text", "text": "hi"}], "2026-01-01T00:00:01Z", mid="m1"),
        _cc("u2", "a1", "user", "first try", "2026-01-01T00:00:02Z"),
        _cc("a2", "u2", "assistant", [{"type": "text", "text": "one"}], "2026-01-01T00:00:03Z", mid="m2"),
        _cc("u3", "a1", "user", "second try", "2026-01-01T00:00:04Z"),
        _cc("a3", "u3", "assistant", [{"type": "text", "text": "two"}], "2026-01-01T00:00:05Z", mid="m3"),
    ]
    transcript = parse_file(_jsonl(tmp_path / "fork.jsonl", records))
    assert transcript.tree is True
    index = _by_key(transcript)
    assert index["u2"].parent_key == "a1" and index["u3"].parent_key == "a1"
    assert transcript.active_leaf_key == "a3"
    assert _path_to(transcript, "a3") == ["u1", "a1", "u3", "a3"]
    # the same file with the first branch written last: the active branch follows time
    records[2]["timestamp"], records[3]["timestamp"] = "2026-01-01T00:00:06Z", "2026-01-01T00:00:07Z"
    transcript = parse_file(_jsonl(tmp_path / "fork2.jsonl", records))
    assert transcript.active_leaf_key == "a2"


def test_split_turn_is_merged_and_results_follow() -> None:
    """tool_heavy.jsonl lines 34-38: assistant record (msg …5jdsym, tool_use …ShAGoU), its
    progress, its tool_result, a second assistant record of the same message.id (tool_use
    …XBnfV2) and its result.  The API saw one turn with both calls, then both results."""
    transcript = parse_file(REAL / "marot-spotter/tool_heavy.jsonl")
    index = _by_key(transcript)
    turn = index["9c0157de-950c-4b36-8c81-537b79e0d6b4"]
    assert turn.role is Role.ASSISTANT and turn.metadata["merged_lines"] == [34, 37]
    calls = [p for p in turn.parts if isinstance(p, ToolCallPart)]
    assert [c.call_id[-6:] for c in calls] == ["ShAGoU", "XBnfV2"]
    after = [m for m in transcript.messages if m.key in _descendant_chain(transcript, turn.key, 4)]
    assert [(m.role, m.kind) for m in after] == [
        (Role.SYSTEM, MessageKind.PROGRESS),
        (Role.TOOL, MessageKind.CHAT),
        (Role.TOOL, MessageKind.CHAT),
        (Role.USER, MessageKind.CHAT),
    ]
    results = [p for m in after for p in m.parts if isinstance(p, ToolResultPart)]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    # one assistant message per message.id in the whole file
    ids = [m.metadata["message_id"] for m in transcript.messages if m.role is Role.ASSISTANT]
    assert len(ids) == len(set(ids)) == 4


def _descendant_chain(transcript: ImportedTranscript, key: str, n: int) -> list[str]:
    children = collections.defaultdict(list)
    for m in transcript.messages:
        children[m.parent_key].append(m.key)
    out: list[str] = []
    current = key
    for _ in range(n):
        (current,) = children[current]
        out.append(current)
    return out


def test_parallel_results_chain_after_turn() -> None:
    """tool_heavy.jsonl lines 27-33: one turn with two parallel calls; Claude Code parents
    each result on the record of its own tool_use, so the raw tree forks.  The importer
    chains the results after the turn: no fork remains in this file."""
    transcript = parse_file(REAL / "marot-spotter/tool_heavy.jsonl")
    children = collections.Counter(m.parent_key for m in transcript.messages)
    assert max(children.values()) == 1
    turn = next(m for m in transcript.messages if m.metadata.get("merged_lines") == [27, 28, 29, 30])
    assert [type(p) for p in turn.parts] == [TextPart, ThinkingPart, ToolCallPart, ToolCallPart]
    thinking = turn.parts[1]
    assert isinstance(thinking, ThinkingPart) and thinking.signature


def test_subagent_folding() -> None:
    rel = "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    transcript = parse_file(REAL / rel)
    assert [(p.key, p.runtime_kind, p.parent_key) for p in transcript.participants] == [
        ("main", RuntimeKind.CHAT, None),
        ("subagent:agent-a2898e3", RuntimeKind.SUBAGENT_CHILD, "main"),
        ("subagent:agent-acompact-e1f845", RuntimeKind.SUBAGENT_CHILD, "main"),
    ]
    per = collections.Counter(m.participant_key for m in transcript.messages)
    assert per == {"main": 1397, "subagent:agent-a2898e3": 116, "subagent:agent-acompact-e1f845": 5}
    child = [m for m in transcript.messages if m.participant_key == "subagent:agent-a2898e3"]
    assert all(m.source_ref.startswith("4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl line ") for m in child)
    assert sum(isinstance(p, ToolCallPart) for m in child for p in m.parts) == 33
    reports = [m for m in transcript.messages if "child_report_for" in m.metadata]
    assert [(m.role, m.metadata["child_report_for"], m.participant_key) for m in reports] == [
        (Role.TOOL, "subagent:agent-a2898e3", "main")
    ]
    assert transcript.metadata["subagent_files"] == [
        "4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl",
        "4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl",
    ]
    paths = sorted(
        [REAL / rel, *(REAL / "marot-spotter" / p for p in transcript.metadata["subagent_files"])], key=str
    )
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()
    assert transcript.content_key == f"sha256:{digest}"
    assert transcript.title.startswith("Work on bead spotter-dov.")
    assert len(transcript.title) <= 80


def test_subagent_file_alone() -> None:
    rel = "marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl"
    transcript = parse_file(REAL / rel)
    assert [(p.key, p.runtime_kind, p.parent_key) for p in transcript.participants] == [
        ("subagent:agent-a2898e3", RuntimeKind.SUBAGENT_CHILD, None)
    ]
    assert {m.participant_key for m in transcript.messages} == {"subagent:agent-a2898e3"}
    assert transcript.content_key == "sha256:" + hashlib.sha256((REAL / rel).read_bytes()).hexdigest()
    assert transcript.title


def test_inline_sidechains_become_children() -> None:
    transcript = parse_file(REAL / "claude-code-viewer-dkimuson/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl")
    assert [(p.key, p.parent_key) for p in transcript.participants] == [
        ("main", None), ("subagent:sidechain-1", "main"), ("subagent:sidechain-2", "main"),
    ]
    reports = {m.key: m.metadata["child_report_for"] for m in transcript.messages if "child_report_for" in m.metadata}
    assert reports == {
        "dc46f79e-41aa-4f14-90b8-c2100fabc54c": "subagent:sidechain-1",
        "7fce531d-01f6-46bc-ad70-3fcd2549ea02": "subagent:sidechain-2",
    }


def test_errors_thinking_and_results() -> None:
    transcript = parse_file(REAL / "marot-spotter/short.jsonl")
    results = [p for m in transcript.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert [r.is_error for r in results] == [True, True]
    assert transcript.notes == []


def test_resumed_session_repeats_kept_once() -> None:
    transcript = parse_file(REAL / "moredip-session-share/general-tool-calls.jsonl")
    assert transcript.notes[0] == "lines 355-529: 171 records repeat earlier records (resumed session) and were kept once"
    assert "line 560: content[0]: call toolu_016AxdxfjYf6j77zeLDN8qwe has no result" in transcript.notes


def test_same_uuid_repeated(tmp_path: Path) -> None:
    first = _cc("u1", None, "user", "hello", "2026-01-01T00:00:00Z")
    reply = _cc("a1", "u1", "assistant", [{"type": "text", "text": "hi"}], "2026-01-01T00:00:01Z", mid="m1")
    again = _cc("u2", "a1", "user", "more", "2026-01-01T00:00:02Z")
    transcript = parse_file(_jsonl(tmp_path / "resumed.jsonl", [first, reply, first, reply, again]))
    assert [m.key for m in transcript.messages] == ["u1", "a1", "u2"]
    assert transcript.notes == ["lines 3-4: 2 records repeat earlier records (resumed session) and were kept once"]


def test_claude_code_images_and_orphan(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    b64 = base64.b64encode(png).decode()
    records = [
        _cc("u1", None, "user", [{"type": "text", "text": "look"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}], "2026-01-01T00:00:00Z"),
        _cc("a1", "u1", "assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Screenshot", "input": {}}], "2026-01-01T00:00:01Z", mid="m1"),
        _cc("r1", "a1", "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False, "content": [
            {"type": "text", "text": "captured"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},
        ]}, {"type": "tool_result", "tool_use_id": "toolu_404", "content": "stray"}, {"type": "text", "text": "and?"}], "2026-01-01T00:00:02Z"),
    ]
    transcript = parse_file(_jsonl(tmp_path / "img.jsonl", records))
    key = "sha256:" + hashlib.sha256(png).hexdigest()
    user = transcript.messages[0]
    assert user.parts == [TextPart(text="look"), ImagePart(media_type="image/png", blob_key=key, size_bytes=len(png))]
    assert user.attachments == {key: png}
    result, orphan, text = transcript.messages[2:]
    assert [m.key for m in transcript.messages[2:]] == ["r1", "r1#1", "r1#2"]
    assert [m.parent_key for m in transcript.messages[2:]] == ["a1", "r1", "r1#1"]
    part = result.parts[0]
    assert isinstance(part, ToolResultPart) and part.text == "captured" and part.call_id == "toolu_1"
    assert part.images == (ImagePart(media_type="image/png", blob_key=key, size_bytes=len(png)),)
    assert result.attachments == {key: png}
    assert (orphan.role, orphan.kind, orphan.parts, orphan.metadata) == (
        Role.USER, MessageKind.OBSERVATION, [TextPart(text="stray")], {"orphan_call_id": "toolu_404"}
    )
    assert text.parts == [TextPart(text="and?")] and text.role is Role.USER
    assert transcript.notes == ["line 3: content[1]: tool result for call 'toolu_404' answers no earlier call; kept as an observation"]


# --------------------------------------------------------------------------- OpenAI chat


def test_tau_bench_duplicate_call_ids_renamed() -> None:
    transcript = parse_file(REAL / "tau-bench-airline-gpt4o/task002_trial1_idx052.json")
    assert transcript.notes == [
        "traj[42].tool_calls[0]: duplicate call id 'call_lnzJf0iU69PFY0FxSmJh6D7a' renamed to 'call_lnzJf0iU69PFY0FxSmJh6D7a_dup2'",
        "traj[46].tool_calls[0]: duplicate call id 'call_dhYivf6VRUVJfU9DItC2EQ95' renamed to 'call_dhYivf6VRUVJfU9DItC2EQ95_dup2'",
        "traj[50].tool_calls[0]: duplicate call id 'call_7MqMjJMaXLRTpdPdzCjzjfpE' renamed to 'call_7MqMjJMaXLRTpdPdzCjzjfpE_dup2'",
        "traj[58].tool_calls[0]: duplicate call id 'call_cVVsJ9hu9hK5CQyt1F4wULOk' renamed to 'call_cVVsJ9hu9hK5CQyt1F4wULOk_dup2'",
        "traj[60].tool_calls[0]: duplicate call id 'call_dhYivf6VRUVJfU9DItC2EQ95' renamed to 'call_dhYivf6VRUVJfU9DItC2EQ95_dup3'",
    ]
    index = {m.source_ref: m for m in transcript.messages}
    call = index["traj[60]"].parts[-1]
    assert isinstance(call, ToolCallPart) and call.call_id == "call_dhYivf6VRUVJfU9DItC2EQ95_dup3"
    result = index["traj[61]"].parts[0]
    assert isinstance(result, ToolResultPart) and result.call_id == "call_dhYivf6VRUVJfU9DItC2EQ95_dup3"
    assert transcript.metadata["reward"] == 0.0 and transcript.metadata["task_id"] == 2
    assert transcript.title.startswith("Hi, I'm having a bit of a situation")


def test_openhands_tools_and_unanswered_finish() -> None:
    transcript = parse_file(REAL / "adp-swe-gym-openhands/Project-MONAI__MONAI-5686_4.json")
    assert [t["function"]["name"] for t in transcript.tools] == ["execute_bash", "finish", "str_replace_editor"]
    assert all(t["type"] == "function" for t in transcript.tools)
    assert len(transcript.notes) == 1 and transcript.notes[0].endswith("has no result")
    assert transcript.metadata["resolved"] is True


def test_text_actions_openhands_blocks() -> None:
    transcript = parse_file(REAL / "adp-swe-play-openhands/swe-play-0.json")
    first = transcript.messages[2]
    assert first.role is Role.ASSISTANT
    assert first.metadata["action_tool"] == "str_replace_editor"
    assert first.metadata["action_args"] == {"command": "view", "path": "/workspace"}
    assert first.metadata["action"].startswith("<function=str_replace_editor>")
    observation = transcript.messages[3]
    assert observation.kind is MessageKind.OBSERVATION and observation.role is Role.USER
    assert observation.metadata == {"action": first.metadata["action"], "action_tool": "str_replace_editor"}
    assert transcript.messages[1].kind is MessageKind.CHAT


def test_text_actions_swe_agent_and_nebius() -> None:
    traj = parse_file(REAL / "swe-agent/ctf__crypto__BabyEncryption.traj")
    assistant = traj.messages[2]
    assert assistant.metadata == {"action": "open chall.py", "action_tool": "open"}
    observation = traj.messages[3]
    assert observation.kind is MessageKind.OBSERVATION
    assert observation.metadata == {"action": "open chall.py", "action_tool": "open"}
    first_text = observation.parts[0]
    assert isinstance(first_text, TextPart) and first_text.text.startswith("[File: /__Users__user__LLM_CTF")
    assert traj.metadata["exit_status"] == "submitted"
    nebius = parse_file(REAL / "adp-nebius-swe-agent/marshmallow-code__apispec-811_21.json")
    assert nebius.messages[2].metadata["action"] == 'grep -r "class OpenAPIConverter" src'
    assert nebius.messages[2].metadata["action_tool"] == "grep"
    assert nebius.messages[3].metadata["action_tool"] == "grep"
    assert nebius.messages[-1].metadata["action"] == "submit"
    assert nebius.participants[0].model == "swe-agent-llama-70b"


def test_mini_swe_agent_exit_and_reasoning() -> None:
    transcript = parse_file(REAL / "mini-swe-agent-deepseek/reasoner_dev__pvlib__pvlib-python-1606.traj.json")
    last = transcript.messages[-1]
    assert (last.role, last.kind, last.metadata["source_role"], last.metadata["exit_status"]) == (
        Role.SYSTEM, MessageKind.META, "exit", "InternalServerError"
    )
    assistant = transcript.messages[2]
    assert isinstance(assistant.parts[0], ThinkingPart) and assistant.model == "deepseek-reasoner"
    assert transcript.participants[0].model == "deepseek-reasoner"


def test_orphan_result_and_id_rewrites(tmp_path: Path) -> None:
    long_id = "x" * 70
    doc = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call.1", "type": "function", "function": {"name": "a", "arguments": "{\"k\": 1}"}},
            {"id": long_id, "type": "function", "function": {"name": "b", "arguments": "{}"}},
            {"type": "function", "function": {"name": "c", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call.1", "content": "A"},
        {"role": "tool", "tool_call_id": long_id, "content": "B"},
        {"role": "tool", "tool_call_id": "nope", "content": "orphan text"},
    ]}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(doc))
    transcript = parse_file(path)
    calls = [p for p in transcript.messages[1].parts if isinstance(p, ToolCallPart)]
    hashed = "x" * 47 + "_" + hashlib.sha256(long_id.encode()).hexdigest()[:16]
    assert [c.call_id for c in calls] == ["call_1", hashed, "call_synthetic_1"]
    assert calls[0].arguments_json == "{\"k\": 1}"
    assert [m.parts[0].call_id for m in transcript.messages[2:4] if isinstance(m.parts[0], ToolResultPart)] == ["call_1", hashed]
    orphan = transcript.messages[4]
    assert (orphan.role, orphan.kind, orphan.parts, orphan.metadata) == (
        Role.USER, MessageKind.OBSERVATION, [TextPart(text="orphan text")], {"orphan_call_id": "nope"}
    )
    assert transcript.notes == [
        "messages[1].tool_calls[0]: call id 'call.1' rewritten to 'call_1' (only [A-Za-z0-9_-], at most 64 characters)",
        f"messages[1].tool_calls[1]: call id '{long_id}' rewritten to '{hashed}' (only [A-Za-z0-9_-], at most 64 characters)",
        "messages[1].tool_calls[2]: tool call without an id was given id 'call_synthetic_1'",
        "messages[4]: tool result for call 'nope' answers no earlier call; kept as an observation",
        "messages[1].tool_calls[2]: call call_synthetic_1 has no result",
    ]


def test_openai_content_parts_and_images(tmp_path: Path) -> None:
    raw = b"GIF89a-bytes"
    data_url = "data:image/gif;base64," + base64.b64encode(raw).decode()
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": data_url}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ]},
        {"role": "assistant", "content": "a cat"},
    ]
    path = _jsonl(tmp_path / "chat.jsonl", messages)
    transcript = parse_file(path)
    key = "sha256:" + hashlib.sha256(raw).hexdigest()
    assert transcript.messages[0].parts == [
        TextPart(text="what is this?"),
        ImagePart(media_type="image/gif", blob_key=key, size_bytes=len(raw)),
        ImagePart(media_type="image/png", url="https://example.com/cat.png"),
    ]
    assert transcript.messages[0].attachments == {key: raw}
    assert [m.key for m in transcript.messages] == ["line:1", "line:2"]
    assert transcript.title == "what is this?"


# --------------------------------------------------------------------------- malformed input


def _error(path: Path) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as info:
        parse_file(path)
    assert info.value.path == str(path)
    return info.value


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    good = [
        _cc("u1", None, "user", "hello", "2026-01-01T00:00:00Z"),
        _cc("a1", "u1", "assistant", [{"type": "text", "text": "hi"}], "2026-01-01T00:00:01Z", mid="m1"),
    ]
    cut = json.dumps(_cc("u2", "a1", "user", "never finished", "2026-01-01T00:00:02Z"))[:57]
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in good) + cut, encoding="utf-8")
    transcript = parse_file(path)
    assert [m.key for m in transcript.messages] == ["u1", "a1"]
    assert transcript.notes == ["line 3: skipped a truncated last line (57 bytes of incomplete JSON)"]
    assert transcript.metadata["skipped_raw_lines"] == [cut]


def test_broken_middle_line(tmp_path: Path) -> None:
    lines = [json.dumps(_cc("u1", None, "user", "hello", "2026-01-01T00:00:00Z")), "{\"type\": \"user\", oops}",
             json.dumps(_cc("u2", "u1", "user", "again", "2026-01-01T00:00:01Z"))]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    error = _error(path)
    assert error.location == "line 2"
    assert error.reason == "invalid JSON: Expecting property name enclosed in double quotes (column 18)"


def test_unknown_role(tmp_path: Path) -> None:
    path = tmp_path / "roles.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]}))
    error = _error(path)
    assert (error.location, error.reason) == ("messages[1]", "unknown role 'robot'")
    jsonl = _jsonl(tmp_path / "roles.jsonl", [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}, {"role": "foo"}])
    error = _error(jsonl)
    assert (error.location, error.reason) == ("line 3", "unknown role 'foo'")
    nebius = tmp_path / "nebius.json"
    nebius.write_text(json.dumps({"trajectory": [{"role": "user", "text": "a"}, {"role": "bot", "text": "b"}]}))
    error = _error(nebius)
    assert (error.location, error.reason) == ("trajectory[1]", "unknown role 'bot'")


def test_empty_and_blank_files(tmp_path: Path) -> None:
    for name, content in (("empty.jsonl", b""), ("blank.json", b" \n\n\t")):
        path = tmp_path / name
        path.write_bytes(content)
        error = _error(path)
        assert (error.location, error.reason) == (None, "file is empty")
        with pytest.raises(ImportFormatError):
            detect_format(path)


def test_binary_files(tmp_path: Path) -> None:
    path = tmp_path / "nul.jsonl"
    path.write_bytes(b'{"a":\x00 1}')
    error = _error(path)
    assert (error.location, error.reason) == ("byte 5", "binary file: NUL byte")
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"messages": ["caf\xe9"]}')
    error = _error(path)
    assert (error.location, error.reason) == ("byte 18", "binary file: not valid UTF-8 (invalid continuation byte)")


def test_wrong_top_level_shapes(tmp_path: Path) -> None:
    path = tmp_path / "obj.json"
    path.write_text(json.dumps({"task": 1, "items": []}))
    error = _error(path)
    assert error.location is None
    assert error.reason == (
        "JSON object has no message list: found keys 'task', 'items'; expected one of 'messages', "
        "'traj', 'history', 'conversation' (chat) or 'history' / 'trajectory' (SWE-agent)"
    )
    path = tmp_path / "num.json"
    path.write_text("42")
    error = _error(path)
    assert error.reason == "not a JSON or JSON Lines transcript: starts with '42'"
    path = tmp_path / "list.json"
    path.write_text(json.dumps(["a", "b"]))
    error = _error(path)
    assert (error.location, error.reason) == ("[0]", "expected chat messages with a 'role', found a string")
    path = tmp_path / "notlist.json"
    path.write_text(json.dumps({"messages": {"role": "user"}}))
    with pytest.raises(ImportFormatError) as info:
        parse_file(path, format="openai-chat")
    assert (info.value.location, info.value.reason) == ("messages", "expected an array of messages, found an object")


def test_json_syntax_error_location(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "messages": [\n    {"role": "user" "content": "x"}\n  ]\n}\n')
    error = _error(path)
    assert (error.location, error.reason) == ("line 3, column 21", "invalid JSON: Expecting ',' delimiter")


def test_unknown_format_argument(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "chat.jsonl", [{"role": "user", "content": "x"}])
    with pytest.raises(ImportFormatError) as info:
        parse_file(path, format="yaml")
    assert info.value.reason == f"unknown format 'yaml': expected 'auto' or one of {', '.join(SUPPORTED_FORMATS)}"
    assert {"openai-chat", "claude-code", "swe-agent", "openai-responses", "anthropic-messages"} <= set(SUPPORTED_FORMATS)


def test_fifty_megabyte_tool_output(tmp_path: Path) -> None:
    size = 50 * 1024 * 1024
    blob = ("0123456789abcdef" * (size // 16 + 1))[:size]
    records = [
        _cc("u1", None, "user", "dump it", "2026-01-01T00:00:00Z"),
        _cc("a1", "u1", "assistant", [{"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "cat big"}}], "2026-01-01T00:00:01Z", mid="m1"),
        _cc("r1", "a1", "user", [{"type": "tool_result", "tool_use_id": "toolu_big", "content": blob}], "2026-01-01T00:00:02Z"),
    ]
    path = _jsonl(tmp_path / "big.jsonl", records)
    started = time.perf_counter()
    transcript = parse_file(path)
    elapsed = time.perf_counter() - started
    result = transcript.messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.text is not None and len(result.text) == size
    assert result.text[:16] == "0123456789abcdef" and result.text[-4:] == blob[-4:]
    assert elapsed < 20.0
