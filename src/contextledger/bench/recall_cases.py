"""The paraphrase cases of ``bench recall``: facts in tool outputs asked for many
exchanges later in other words (English, Japanese, a few Chinese).

Each case is ``(name, lang, tool, result, question, answer)``: the tool result holds the
fact, the question shares no content word with it (a synonym, a description, another
script), and ``answer`` is a string found in that result only — unique across the
cases, so a hit is scored by its text.  The ``ja-seed-*`` and ``en-seed-*`` cases are
written from the scenarios of the two design articles (a tool-using agent's stale
output, retry state, budgets, branch isolation, handoff compaction).
"""

from __future__ import annotations

__all__ = ["HELDOUT_CASES", "PARAPHRASE_CASES", "ParaphraseCase"]

ParaphraseCase = tuple[str, str, str, str, str, str]
"""``(name, lang, tool, result, question, answer)``."""

PARAPHRASE_CASES: tuple[ParaphraseCase, ...] = (
    ("en-staging-port", "en", "get_config", "staging database: host db-stg.internal, port 5433, pool size 20", "Which number do I connect to for the pre-production data store?", "5433"),
    ("en-on-call", "en", "read_file", "Rotation this week: primary Priya Natarajan, secondary Tom Alvarez. Escalate after 15 minutes.", "Who should I page if production goes down right now?", "Priya Natarajan"),
    ("en-flaky-test", "en", "run_tests", "test_checkout_timeout fails intermittently: the payment sandbox answers in 4-9 s and the test waits 5 s", "Why does the purchase flow check break only some of the time?", "payment sandbox"),
    ("en-refund", "en", "get_policy", "Refunds: unused licenses can be returned within 30 days of purchase for the full amount", "How long do buyers have to get their money back?", "30 days"),
    ("en-removed-modules", "en", "web_search", "Python 3.13 removes the cgi, crypt, telnetlib and nntplib modules (PEP 594 dead batteries)", "Which standard library packages disappear in the newest interpreter release?", "telnetlib"),
    ("en-disk", "en", "run_command", "df -h: /dev/nvme0n1p2 mounted on /var is 97% used, 1.2G available", "Is any volume about to run out of room?", "97%"),
    ("en-cert-expiry", "en", "check_tls", "certificate for api.example.com valid until 2026-12-19 (issuer R11)", "When will the HTTPS credential of the API host lapse?", "2026-12-19"),
    ("en-release-owner", "en", "read_file", "RELEASE.md: version 4.2 is cut by Marguerite Okafor on Thursdays", "Who is responsible for shipping new builds?", "Marguerite Okafor"),
    ("en-memory-leak", "en", "profile", "heap grows 40 MB per hour; 92% of retained objects are ImageCache entries never evicted", "What keeps eating RAM over time?", "ImageCache"),
    ("en-rate-limit", "en", "http_get", "429 Too Many Requests: quota 600 calls per minute per token exceeded", "How often am I allowed to hit the endpoint?", "600 calls per minute"),
    ("en-backup", "en", "list_jobs", "nightly snapshot job runs at 02:30 UTC and keeps 14 copies", "At what hour are the copies of the data taken each night?", "02:30 UTC"),
    ("en-license", "en", "read_file", "LICENSE: this project is distributed under the Mozilla Public License 2.0", "What legal terms govern reuse of this code?", "Mozilla Public License"),
    ("en-latency", "en", "query_metrics", "p99 of /search was 1840 ms yesterday, p50 120 ms", "How slow are the worst lookups?", "1840 ms"),
    ("en-migration", "en", "run_command", "alembic current: 0042_add_invoice_totals (head)", "Which schema revision is the database at?", "0042_add_invoice_totals"),
    ("en-vendor", "en", "read_file", "contracts.csv: SMS delivery is provided by Twilight Telecom until June", "Which company sends our text messages?", "Twilight Telecom"),
    ("en-timezone", "en", "get_config", "scheduler.timezone = Europe/Lisbon", "In which local clock are cron jobs interpreted?", "Europe/Lisbon"),
    ("en-max-upload", "en", "get_config", "nginx client_max_body_size 25m", "What is the biggest attachment a user can send?", "25m"),
    ("en-failing-dep", "en", "pip_install", "ERROR: No matching distribution found for torch==1.4.0 on Python 3.12", "Which package could not be resolved during setup?", "torch==1.4.0"),
    ("en-seed-stale", "en", "get_stock", "warehouse B inventory: 312 units of SKU-88 (observed 09:00, refresh hourly)", "How many items were on the shelves at the second depot?", "312 units"),
    ("en-seed-retry", "en", "deploy", "deployment failed at step 3/5: health check timed out; retry token rt-7c1f must be reused", "If I try the rollout again, what must I pass so it resumes?", "rt-7c1f"),
    ("en-seed-budget", "en", "read_file", "context.toml: tool results get at most 18% of the window, history 40%", "How big a slice of the prompt may outputs of functions take?", "18%"),
    ("en-seed-branch", "en", "git_log", "branch experiment-b forked from main at commit 9f3e2a1", "Where did the alternative line of work split off?", "9f3e2a1"),
    ("en-seed-handoff", "en", "read_file", "handoff.md: next step — re-run the importer with --strict after fixing row 4411", "What was planned to happen after the summary?", "row 4411"),
    ("en-seed-privacy", "en", "get_policy", "data class: customer emails are restricted; never send them to external model vendors", "Can I forward the shoppers' addresses to a third-party AI?", "external model vendors"),
    ("en-gpu", "en", "run_command", "nvidia-smi: 2 x A10G, 23028MiB each", "What accelerators does the box have?", "A10G"),
    ("en-coverage", "en", "run_tests", "coverage: 71.4% of lines, billing/ at 38%", "How much of the code do the checks exercise?", "71.4%"),
    ("ja-prod-port", "ja", "get_config", "本番環境のデータベースはホストdb-prd、ポート6432で稼働しています", "運用中のDBにはどの番号でつなげばいいですか？", "6432"),
    ("ja-meeting", "ja", "read_calendar", "来週の定例会議は木曜日の午後3時に変更されました", "次の週次ミーティングはいつに移りましたか？", "木曜日の午後3時"),
    ("ja-invoice", "ja", "get_billing", "請求書の支払期限は毎月25日です。遅延すると手数料がかかります", "インボイスはいつまでに払わなければなりませんか？", "毎月25日"),
    ("ja-oncall", "ja", "read_file", "今週の当番は佐藤花子さん、副当番は田中一郎さんです", "障害が起きたら誰に連絡すればいい？", "佐藤花子"),
    ("ja-disk", "ja", "run_command", "ディスク使用率: /data が98%に達しています。残り800MB", "容量がいっぱいになりそうな場所はありますか？", "98%"),
    ("ja-deadline", "ja", "read_file", "プロジェクトの納品日は2027年3月31日に決まりました", "成果物はいつまでに出す必要がありますか？", "2027年3月31日"),
    ("ja-office", "ja", "get_policy", "大阪オフィスは梅田スカイビル22階に移転しました", "関西の拠点は今どこにありますか？", "梅田スカイビル"),
    ("ja-budget", "ja", "get_billing", "今期のクラウド予算は月額120万円です", "サーバー費用の上限はいくらですか？", "120万円"),
    ("ja-error", "ja", "run_tests", "決済テストが失敗: カード会社のAPIが認証エラー(E4031)を返しました", "支払い周りのチェックが落ちた原因は？", "E4031"),
    ("ja-version", "ja", "run_command", "node --version の結果は v22.11.0 でした", "JavaScriptの実行環境は何番ですか？", "v22.11.0"),
    ("ja-vendor", "ja", "read_file", "翻訳作業はことば工房株式会社に委託しています", "訳文を作っている外部の会社はどこ？", "ことば工房"),
    ("ja-holiday", "ja", "read_calendar", "年末年始の休業期間は12月28日から1月5日までです", "正月休みはいつからいつまで？", "12月28日"),
    ("ja-password", "ja", "get_policy", "パスワードは90日ごとに更新する規則です", "ログイン用の合言葉はどのくらいの頻度で変えるべき？", "90日ごと"),
    ("ja-latency", "ja", "query_metrics", "検索APIの応答時間は昨日の最悪値で2300ミリ秒でした", "一番遅かった問い合わせはどれくらいかかった？", "2300ミリ秒"),
    ("ja-license", "ja", "read_file", "このライブラリはApache License 2.0で配布されています", "このコードを再利用するときの法的な条件は？", "Apache License"),
    ("ja-seed-stale", "ja", "get_stock", "倉庫Aの在庫は午前9時時点で450個です（1時間ごとに更新）", "最初の保管拠点には品物がいくつ残っていましたか？", "450個"),
    ("ja-seed-retry", "ja", "deploy", "デプロイはステップ2で失敗しました。再試行キー rk-55aa を必ず使ってください", "もう一度リリースを試すときに何を渡せば続きから再開できますか？", "rk-55aa"),
    ("ja-seed-budget", "ja", "read_file", "コンテキスト設定: ツール結果は全体の15%まで、会話履歴は45%まで", "関数の出力にはプロンプトのどれだけの割合を割り当てられますか？", "15%まで"),
    ("ja-seed-branch", "ja", "git_log", "ブランチ実験Cはコミット4b7d0e9でmainから分岐しました", "別案の作業系統はどの時点で枝分かれしましたか？", "4b7d0e9"),
    ("ja-seed-handoff", "ja", "read_file", "引き継ぎメモ: 次の作業は顧客表の3302行目を修正してから取り込みを再実行すること", "要約の後に予定されていた段取りは何ですか？", "3302行目"),
    ("ja-seed-privacy", "ja", "get_policy", "個人の電話番号は機密扱いです。社外のAIサービスには送信禁止", "利用者の連絡先を外部の人工知能に渡してもいいですか？", "送信禁止"),
    ("ja-seed-subagent", "ja", "read_file", "子エージェントの報告: 調査対象の3社のうち北辰物産だけが条件を満たしました", "下位の作業者の調べで要件に合ったのはどの企業でしたか？", "北辰物産"),
    ("zh-port", "zh", "get_config", "测试环境的缓存服务器使用端口7380", "预发布环境的缓存该连哪个号码？", "7380"),
    ("zh-owner", "zh", "read_file", "本周值班工程师是王晓明", "线上出故障时应该找谁？", "王晓明"),
    ("zh-deadline", "zh", "read_file", "合同的续签截止日期是2027年1月15日", "协议最晚什么时候要重新签？", "2027年1月15日"),
)
"""The cases (26 English, 22 Japanese, 3 Chinese)."""

HELDOUT_CASES: tuple[ParaphraseCase, ...] = (
    ("ho-en-parking", "en", "read_file", "facilities.md: visitor cars go to level P3 of the east garage; badge needed after 18:00", "Where can guests leave their vehicles?", "level P3"),
    ("ho-en-vaccine", "en", "query_db", "clinic_schedule: flu shots offered Tuesdays 08:00-11:00 at room 214", "When can patients get their influenza jab?", "Tuesdays 08:00-11:00"),
    ("ho-en-freight", "en", "track_shipment", "container MSKU4471920 departed Rotterdam, ETA Halifax 2027-02-03", "When is the box from the Dutch port expected to arrive?", "2027-02-03"),
    ("ho-en-grading", "en", "read_file", "syllabus: final exam counts 45% of the mark, labs 30%, quizzes 25%", "How much does the end-of-term test weigh?", "45% of the mark"),
    ("ho-en-fx", "en", "http_get", "EUR/JPY closed at 163.42 on the Frankfurt feed", "What was the euro worth in yen at the end of trading?", "163.42"),
    ("ho-en-thermostat", "en", "home_api", "living room thermostat setpoint 19.5 C, heating schedule eco until 06:30", "How warm is the lounge set to be?", "19.5 C"),
    ("ho-en-court", "en", "search_docs", "hearing for case 22-CV-0918 moved to courtroom 6B on May 14", "In which chamber will the lawsuit be heard?", "courtroom 6B"),
    ("ho-en-visa", "en", "web_search", "travellers from Chile may stay in Japan up to 90 days without a visa", "How long can a Chilean tourist remain in that country without special papers?", "up to 90 days"),
    ("ho-ja-parking", "ja", "read_file", "来客用の駐車場は北館地下2階です。18時以降は警備室で受付", "お客さんの車はどこに停めればいいですか？", "北館地下2階"),
    ("ho-ja-clinic", "ja", "query_db", "健康診断の受付は毎週水曜日の午前中、3階の健診センターで行います", "社員の定期検診はいつどこで受けられますか？", "健診センター"),
    ("ho-ja-shipping", "ja", "track_shipment", "荷物番号JP88310は神戸港を出港し、到着予定は2月9日です", "港から送られた貨物はいつ届く見込みですか？", "2月9日"),
    ("ho-ja-school", "ja", "read_file", "期末試験は成績の4割、レポートは3割、出席は3割で評価します", "学期末のテストは評価のどれくらいを占めますか？", "4割"),
    ("ho-ja-recipe", "ja", "read_file", "カレーの隠し味はインスタントコーヒー小さじ1杯です", "料理の秘密の材料は何ですか？", "インスタントコーヒー"),
    ("ho-ja-train", "ja", "http_get", "東海道新幹線は大雨のため静岡・浜松間で運転を見合わせています", "高速鉄道が止まっている区間はどこですか？", "静岡・浜松間"),
    ("ho-ja-insurance", "ja", "get_policy", "海外出張中の医療費は1件あたり300万円まで会社の保険で補償されます", "外国での仕事中に病院にかかった費用はいくらまで出ますか？", "300万円まで"),
    ("ho-ja-plant", "ja", "home_api", "ベランダの鉢植えの水やりは毎朝7時に自動で行われる設定です", "植物にはいつ水が与えられますか？", "毎朝7時"),
)
"""Held-out cases (8 English, 8 Japanese; other domains than :data:`PARAPHRASE_CASES`:
facilities, a clinic, freight, a course, exchange rates, a home, a court, travel, a
recipe, trains, insurance, plants), reported apart from them and never used to choose
a rule or a constant."""
