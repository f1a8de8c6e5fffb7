"""Which sentences of a user message are constraints on the agent's work, and their scope.

Seed 001 §6 problem 3/4 and §10: a user's prohibitions and requirements must survive every
compaction, so they are pinned — but only those.  A pinned sentence costs tokens in every
later request, so the classifier is deliberately narrow:

* **Prose only** (:mod:`contextledger.policy.prose`).  Text the client injects (:mod:`contextledger.ingest.preambles`), code
  fences, indented code, block quotes (``>``), quoted e-mails (``On … wrote:``, an
  ``Original Message`` header and everything after it), HTML comments, example blocks
  (``START OF EXAMPLE`` … ``END OF EXAMPLE``, ``<example>`` … ``</example>``) and log lines
  (timestamps, ``[ERROR]``, ``WARNING:root:``, tracebacks, shell and REPL prompts,
  ``file:line:`` compiler output) are pasted or quoted text, never the user's rule.  Inside
  a sentence, text between double quotes (``"…"``, ``“…”``, ``「…」``, ``『…』``) is masked:
  a rule word there is quoted, not stated.
* **Not a question.**  ``?``/``？``, a leading question word, or a Japanese/Chinese
  question ending (``か``, ``かな``, ``吗``, ``呢``).
* **A constraint marker** (English, Japanese, Chinese): a prohibition (``never``,
  ``do not``, ``must not``, ``avoid``, ``〜しないで``, ``〜禁止``, ``不要``, ``请勿`` …), an
  obligation (``must``, ``always``, ``make sure``, ``SHOULD``, ``必ず``, ``必须`` …), an
  approval gate (``ask before``, ``wait for my approval``, ``〜前に確認``, ``未经同意``), a
  target path (``only change files under src/api/``, ``src/api 以下だけ``, ``只修改``) or
  a limit on the request (``…, without changing the dates``).
* **About the work.**  The clause holding a prohibition/obligation marker must name work:
  a work verb (change, run, commit, 変更, 実行, 修改 …), a work noun (file, test, API,
  ファイル, 测试 …), a path, a back-quoted span or an identifier.  "Don't give up,
  buddy!", "Don't forget to take breaks", "Must be awesome to see your stuff on display",
  "無理しないでね", "别担心" name none and are chit-chat.

Scope (seed 001 §6 problem 4, situational constraints): a constraint that names no path
or tool of its own, opens with no scope phrase of its own ("In X, …", "X では、", "在 X 中，")
and refers back ("the contents", "it", "内容", "其他") takes its scope from the nearest
earlier sentence of the same paragraph (at most two back) that names a path or tool
("In CONVENTIONS.md, reorder the lists.").
The passage from that sentence to the constraint is kept verbatim as one constraint.

A constraint ending with a colon introduces what it forbids or requires ("Do not modify
these files:", "次のファイルは変更しないでください："): the bulleted or numbered list
that follows is kept with it, verbatim (:func:`_introduced_list_end`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from contextledger.ingest.preambles import strip_injected
from contextledger.limits import scan_window
from contextledger.policy.prose import BULLET, Sentence, prose_sentences

__all__ = [
    "EN_TARGET",
    "JA_TARGET",
    "ZH_TARGET",
    "Passage",
    "Sentence",
    "constraint_passages",
    "is_constraint_sentence",
    "prose_sentences",
    "sentence_scope",
]


@dataclass(frozen=True)
class Passage:
    """A constraint as pinned: ``text`` verbatim (the scope sentence, if any, then the
    constraint sentence, with the message's own spacing between them); ``sentence`` the
    constraint sentence alone; ``scope_paths``/``scope_tools`` the scope taken from the
    scope sentence (empty when the constraint carries no borrowed scope)."""

    text: str
    sentence: str
    scope_paths: tuple[str, ...] = ()
    scope_tools: tuple[str, ...] = ()


_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|「[^」\n]*」|『[^』\n]*』")


_EMPHASIS = re.compile(r"\*\*|(?<!\w)__|__(?!\w)")
_NAME = re.compile(r"[A-Za-z0-9_./*\-@+]*")


def _mask_quotes(sentence: str) -> str:
    """``sentence`` with the insides of double/CJK quotes blanked (same length); a quoted
    single name (``「lib/core」``, ``"generated"``) is a name, not a quotation, and stays."""

    def blank(m: re.Match[str]) -> str:
        quoted = m.group(0)
        if _NAME.fullmatch(quoted[1:-1]):
            return quoted
        return quoted[0] + " " * (len(quoted) - 2) + quoted[-1]

    return _EMPHASIS.sub(lambda m: " " * len(m.group(0)), _QUOTED.sub(blank, sentence))


# --- markers ------------------------------------------------------------------------------

_LEAD = r"(?:^|[,;:(]\s*|\s[-—–→]\s*|\b(?:and|but|so|then|also|please|just|now|again|however|otherwise)\s+)"
_PLEASE = r"(?:(?:please|pls|kindly|also|and|just)[,\s]+)*"
_EN_STRICT = re.compile(
    r"^\W*" + _PLEASE + r"(?:never|do\s+not|don't|don’t|dont|must\s+not|mustn't|avoid|refrain\s+from|stop\s+\w+ing)\b"
    r"|" + _LEAD + _PLEASE + r"(?:never|do\s+not|don't|don’t|avoid)\s+(?=[a-z])"
    r"|\bmust\s+(?:not|never)\b|\bmustn't\b|\bmust\b(?!\s+(?:have|'ve|be\s+(?:so|really|very|nice|great|awesome|fun|cool|hard|tough|tired|exhausting|frustrating|annoying|exciting|amazing|wonderful|lovely|busy)\b))"
    r"|\b(?:you|we)\s+(?:should\s+(?:never|not|always|only)|shouldn't|shall\s+not|are\s+not\s+(?:allowed|permitted)\s+to|may\s+not|cannot|can\s+only|need\s+to\s+always)\b"
    r"|(?-i:\b(?:NEVER|DO\s+NOT|DON'T|MUST|SHALL\s+NOT|SHOULD(?:\s+NOT)?|AVOID|ONLY)\b)"
    r"|^\W*" + _PLEASE + r"always\b|" + _LEAD + r"always\s+(?!been\b)(?=[a-z])"
    r"|(?:^\W*|[,;:]\s*|\b(?:and|then|please|also|always)\s+)(?:please\s+)?(?:make\s+sure|ensure|be\s+sure\s+to)\b"
    r"|" + _LEAD + r"(?:please\s+)?prefer\b"
    r"|\b(?:it'?s\s+|it\s+is\s+)?(?:very\s+|really\s+)?(?:important|critical|essential|crucial|vital)\s+(?:that\s+you\b|(?:for\s+you\s+)?(?:not\s+)?to\b)"
    r"|\b(?:is|are)\s+not\s+acceptable\b|\bstrictly\b|(?-i:\b(?:do|does|must|should|can|will)\s+NOT\b)"
    r"|\b(?:make|keep)\s+(?:the\s+|your\s+)?(?:minimal|minimum|smallest)\b|\bminimal\s+(?:changes|diff|edits)\b"
    r"|\bi\s+(?:really\s+)?(?:don'?t|do\s+not)\s+(?:want|need)\b",
    re.IGNORECASE,
)
"""Prohibitions and obligations (English); the clause holding one must name work."""

_EN_GATE = re.compile(
    r"\bask\s+(?:me\s+)?(?:first|before)\b|\bcheck\s+with\s+me\s+(?:first|before)\b|"
    r"\bwait\s+for\s+(?:my|an?|explicit)\s+(?:explicit\s+)?(?:approval|go-ahead|go\s+ahead|"
    r"confirmation|ok|okay|sign-off)\b|\bwithout\s+my\s+(?:approval|permission|ok|okay|sign-off|consent)\b|"
    r"\bget\s+my\s+(?:approval|permission|ok|sign-off)\b|\buntil\s+i\s+(?:approve|say\s+so|confirm)\b|"
    r"\bneeds?\s+my\s+approval\b",
    re.IGNORECASE,
)
"""Approval gates (English): always about the work."""

_EN_WITHOUT = re.compile(r"\bwithout\s+(?:\w+ly\s+)?(?P<verb>[a-z]+ing)\b", re.IGNORECASE)
_EN_REQUEST = re.compile(
    r"\b(?:i|we)\s+(?:just\s+|really\s+|only\s+)?(?:need|want|would\s+like|'d\s+like)\b|\bplease\b|\btry\s+to\b|"
    r"\b(?:can|could|would)\s+you\b",
    re.IGNORECASE,
)
EN_TARGET = re.compile(
    r"\b(?:only\s+(?:change|modify|edit|touch|update|write\s+to|work\s+(?:in|on))|"
    r"limit\s+(?:your\s+)?(?:changes|edits)\s+to|keep\s+(?:your\s+)?(?:changes|edits)\s+"
    r"(?:inside|within|under|in))\b(?:\s+(?:the\s+)?(?:files?|code)\s*)?"
    r"(?:\s*(?:under|in|inside|within))?\s+(?P<rest>.+)$",
    re.IGNORECASE,
)
"""Target paths (English): ``only change files under src/api/``; group ``rest`` follows."""
_EN_ONLY = re.compile(
    r"^\W*" + _PLEASE + r"(?:(?:read|edit|change|modify|touch|use|run|call|write|return)\s+)?only\b"
    r"|\b(?:only|exclusively)\s+(?:via|through|for|with|from|inside|within|under)\b",
    re.IGNORECASE,
)
"""Limits ("Read only changed files", "External code — only via X"); the sentence must
name work."""
_EN_EXCLUDE = re.compile(
    r"^\W*(?:never\s+mind|don'?t\s+(?:know|worry|understand|think|see|remember|get\s+it)|"
    r"do\s+not\s+(?:know|understand|think))\b",
    re.IGNORECASE,
)
_WH = r"why|how|what|when|where|which|who|whom|whose"
"""The English question words a question opens with."""
_WH_WORD = re.compile(r"^\W*(?:" + _WH + r")\b", re.IGNORECASE)
_EN_QUESTION_START = re.compile(
    r"^\W*(?:" + _WH + r"|can|could|would|should|is|are|"
    r"was|were|will|shall|may|might|did|does|have|has|do\s+(?:you|we|i|they))\b",
    re.IGNORECASE,
)

_JA_STRICT = re.compile(
    r"ないで(?:ください|下さい|ほしい|欲しい|くれ|もらえ|いただ)|ないで[ねよ]?[。！!]?$|"
    r"ないこと|ないように|禁止|してはいけな|してはならな|てはいけな|てはならな|"
    r"てはいけま|てはなりま|ちゃだめ|ちゃダメ|てはだめ|ては駄目|厳禁|べからず|するな[。！!]?$|"
    r"必ず(?!しも)|絶対に?(?:.{0,20}ない|.{0,12}こと)|ようにしてください|こと[。！!]?$"
)
"""Prohibitions and obligations (Japanese); the clause holding one must name work."""

_JA_GATE = re.compile(
    r"前に(?:必ず)?(?:確認|相談|承認|許可)|(?:承認|許可|確認|OK)を(?:待って|得て|"
    r"もらって|取って|とって)|勝手に"
)
JA_TARGET = re.compile(
    r"(?<![\w./*\-])(?P<path>[\w./*\-]+)[」』`'\"]?\s*(?:以下|配下|の中|内|ディレクトリ|フォルダ)"
    r"(?:の(?:ファイル)?)?(?:だけ|のみ)"
)
"""Target paths (Japanese): ``src/api 以下だけ``; group ``path``."""
_JA_QUESTION = re.compile(r"(?:[?？]|か[。]?|かな[。]?|でしょう[。]?|ですか[。]?)$")

_ZH_STRICT = re.compile(
    r"不要|(?<![特区分类级告辨个识])别|不准|不得|不许|不可以|不能|禁止|请勿|切勿|勿|千万|必须|务必|一定要|始终|总是|永远不要|只能|只可以|确保|保证"
)
"""Prohibitions and obligations (Chinese); the clause holding one must name work."""

_ZH_GATE = re.compile(r"未经.{0,8}(?:同意|允许|批准|确认|许可)|(?:之前|以前|前)(?:先)?(?:问我|征得|确认|请示)")
ZH_TARGET = re.compile(r"只(?:修改|改动|改|编辑|动)\s*(?P<path>[\w./*\-]+)")
"""Target paths (Chinese): ``只修改 src/api``; group ``path``."""
_ZH_QUESTION = re.compile(r"(?:吗|呢|么)[。？?]?$")

_WORK = re.compile(
    r"\b(?:add|remov|delet|chang|modif|edit|touch|writ|wrote|read|creat|renam|mov|cop[yi]|run|ran\b|execut|call|invok|"
    r"us(?:e|es|ed|ing)\b|install|import|export|commit|push|pull|merg|rebas|deploy|publish|post|submit|releas|build|"
    r"compil|test|fix|patch|refactor|rewrit|implement|produc|generat|regenerat|format|lint|log|print|output|return|"
    r"rais|throw|catch|hardcod|hard-cod|expos|leak|shar|send|upload|download|fetch|quer|access|connect|"
    r"guess|assum|fabricat|invent|duplicat|decid|decision|ask|answer|suggest|propos|present|report|escalat|mutat|"
    r"overwrit|drop|truncat|skip|disabl|enabl|bypass|mock|stub|reorder|sort|downgrad|upgrad|book|cancel|charg|"
    r"refund|pay|includ|exclud|overcomplicat|complicat|over-engineer|wast|clone|checkout|reset|revert|"
    r"port|verif|check|validat|review|document|comment|replac|insert|updat|bump|introduc|bring|scroll|emit|"
    r"contain|cite|preserv|retain|restor|exceed|stage|tag|migrat|seed|backup|restart|kill|reply|respond|"
    r"address|handl|mention|refer|specif|design|plan|split|combin|wrap|inlin|extract|cach|retr|poll|loop|"
    r"debug|configur|pars|task|step|phase|list|object|array|string|regex|struct|enum|coverage|spec|section|"
    r"heading|content|wording|translat|"
    r"file|folder|director|path|code|function|method|class|module|package|dependenc|librar|command|script|"
    r"database|db\b|table|schema|branch|pr\b|mr\b|repo|server|production|prod\b|config|env|secret|"
    r"key|token|password|credential|data|record|field|column|row|signature|interface|endpoint|request|"
    r"response|tool|diff|implementation|docs?\b|readme|notes?\b|version|ci\b|pipeline|style|feature|bug|"
    r"issue|ticket|api|sdk|cli\b|ui\b|flag|option|argument|param|variable|constant|value|type|hint|annotation|"
    r"error|exception|warning|program|apps?\b|service|container|image|docker|git|npm|pip\b|"
    r"flight|reservation|booking|passenger|insurance|baggage|bags?\b|seat|payment|card|certificate|"
    r"order|account|price|cost|budget|markdown|json|yaml|html|css|sql|shell|bash|terminal|editor|browser|"
    r"network|internet|url|link|page|input|attack|exploit|brute|payload)\w*",
    re.IGNORECASE,
)
"""Words that name work (stems; English)."""

_WORK_CJK = re.compile(
    r"変更|編集|修正|削除|追加|作成|書き|書く|実行|使|呼|触|コミット|プッシュ|マージ|デプロイ|インストール|導入|"
    r"持ち込|接続|出力|生成|更新|並べ替|移動|名前|ファイル|フォルダ|ディレクトリ|コード|テスト|API|関数|"
    r"メソッド|クラス|型|依存|パッケージ|ライブラリ|データ|DB|本番|設定|環境|ログ|マイグレーション|スキーマ|"
    r"ブランチ|リポジトリ|秘密|鍵|パスワード|個人情報|確認|承認|許可|相談|ハードコード|公開|送信|最小限|"
    r"レビュー|ビルド|リリース|コメント|ドキュメント|仕様|実装|リファクタ|インポート|サーバ|キャッシュ|"
    r"修改|改动|改|编辑|删除|添加|增加|创建|重写|运行|执行|使用|调用|提交|推送|合并|部署|安装|引入|连接|"
    r"输出|生成|更新|排列|移动|重命名|文件|目录|代码|测试|接口|函数|方法|类型|注解|依赖|包|库|数据|"
    r"生产|配置|环境|日志|迁移|分支|仓库|密钥|密码|脚本|同意|审批|批准|实现|重构|发布|服务器|缓存"
)
"""Words that name work (Japanese and Chinese)."""

_IDENT = re.compile(
    r"`[^`\n]+`|(?<!\S)[^\s/]*/|(?<![\w-])[\w-]+\.[A-Za-z][A-Za-z0-9]{0,9}\b|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*|"
    r"\b\w+_\w+\b|(?<!\w)--?[a-z][\w-]*|\bmcp__\w+"
)
"""Identifiers, paths, flags and back-quoted spans: naming one names work."""

_CLAUSE_EN = re.compile(r"[,;:!?()]|\s[-—–→]\s|—")
_CLAUSE_CJK = re.compile(r"[、，,。！？!?；;：:（）()]")


class _Clauses:
    """Clause boundaries of one (masked) sentence, found once: the clause around a marker is
    then a pair of binary searches, linear in the sentence however many markers it holds."""

    def __init__(self, masked: str, cjk: bool) -> None:
        bound = _CLAUSE_CJK if cjk else _CLAUSE_EN
        self.text = masked
        found = list(bound.finditer(masked))
        self.ends = [m.end() for m in found]
        self.starts = [m.start() for m in found]
        self.relatives = [m.end() for m in _RELATIVE_WORD.finditer(masked)]
        self.stops = [m.start() for m in _STOP.finditer(masked)]

    def around(self, start: int, end: int) -> str:
        """The clause around ``[start, end)``: from the last boundary ending at or before
        ``start`` to the first boundary starting at or after ``end``."""
        i = bisect.bisect_right(self.ends, start) - 1
        lo = self.ends[i] if i >= 0 else 0
        j = bisect.bisect_left(self.starts, end)
        hi = self.starts[j] if j < len(self.starts) else len(self.text)
        return self.text[lo:hi]

    def in_relative(self, start: int) -> bool:
        """True when a ``which``/``who`` comes before ``start`` with no ``. ; :`` between."""
        i = bisect.bisect_right(self.relatives, start) - 1
        if i < 0:
            return False
        k = bisect.bisect_left(self.stops, self.relatives[i])
        return k >= len(self.stops) or self.stops[k] >= start


_SOCIAL = re.compile(
    r"^\W*(?:ever\s+|just\s+|even\s+|you\s+)?(?:give\s+up|worry|hesitate|panic|stress|fret|feel|apologi[sz]e|thank|"
    r"be\s+(?:afraid|sorry|shy|hard\s+on|a\s+stranger|so\b|too\b)|forget\s+to\s+(?:eat|sleep|rest|take\s+(?:a\s+)?breaks?|"
    r"have\s+fun|smile|breathe|drink|hydrate|relax|enjoy)|overdo|overthink|work\s+too\s+hard|lose\s+(?:hope|heart)|"
    r"beat\s+yourself|sweat|mind\b)",
    re.IGNORECASE,
)
"""Predicates of encouragement and small talk ("don't give up", "never hesitate to …")."""


_PERMISSION = re.compile(r"^\W*(?:(?:have|need|got)\s+to\b|need\b(?!\s+to\b))", re.IGNORECASE)
""""you don't have to …", "do not need to …": a permission, not a prohibition."""
_CONJ = re.compile(r"\W{0,8}(?:and|but|so|then|also)\b", re.IGNORECASE)
_RELATIVE_WORD = re.compile(r"\b(?:which|who)\b", re.IGNORECASE)
_STOP = re.compile(r"[.;:]")


def _names_work(clause: str, marker: str) -> bool:
    head, _, after = clause.partition(marker) if marker else ("", "", clause)
    if _SOCIAL.match(after) or (_PERMISSION.match(after) and not re.search(r"\b(?:want|need)\b", marker, re.IGNORECASE)):
        return False
    body = head + " " + after
    return bool(_WORK.search(body) or _WORK_CJK.search(body) or _IDENT.search(body))


def _is_question(sentence: str) -> bool:
    body = sentence.rstrip()
    if body.endswith(("?", "？")):
        return True
    if _JA_QUESTION.search(body) or _ZH_QUESTION.search(body):
        return True
    start = _EN_QUESTION_START.match(body)
    if start is None:
        return False
    # "When editing a file, make sure …!" is a conditional rule, not a question: a
    # question word without a question mark only asks when the sentence is unterminated
    return _WH_WORD.match(body) is None or not body.endswith((".", "!"))


def _marked_work(masked: str, pattern: re.Pattern[str], cjk: bool) -> bool:
    clauses: _Clauses | None = None
    for m in pattern.finditer(masked):
        clauses = clauses or _Clauses(masked, cjk)
        if not cjk and _CONJ.match(m.group(0)) and clauses.in_relative(m.start()):
            continue  # "classes which … (and don't use attrs)": coordination inside a description
        if _names_work(clauses.around(m.start(), m.end()), m.group(0)):
            return True
    return False


def _without_request(masked: str) -> bool:
    """``…, without changing the dates`` in a request: a limit on what the agent may do."""
    for m in _EN_WITHOUT.finditer(masked):
        if m.start() == 0 or not masked[: m.start()].strip(" ,"):
            continue  # a sentence-initial "without …" is a condition, not a limit
        head = masked[: m.start()]
        first = re.match(r"\W*(?:first\s+|then\s+|now\s+|directly\s+|just\s+)*(\w+)", head, re.IGNORECASE)
        verb = first.group(1) if first is not None else ""
        imperative = _WORK.fullmatch(verb) is not None and not verb.casefold().endswith(("s", "ed", "ing"))
        if (_EN_REQUEST.search(head) or imperative) and _WORK.match(m.group("verb")):
            return True
    return False


def is_constraint_sentence(sentence: str) -> bool:
    """True when ``sentence`` constrains the agent's work (rules in the module doc).

    ``sentence`` is one sentence of the user's prose (see :func:`prose_sentences`)."""
    if _is_question(sentence) or _EN_EXCLUDE.match(sentence):
        return False
    masked = _mask_quotes(sentence)
    if EN_TARGET.search(masked) or JA_TARGET.search(masked) or ZH_TARGET.search(masked):
        return True
    if _EN_GATE.search(masked) or _JA_GATE.search(masked) or _ZH_GATE.search(masked):
        return True
    if _without_request(masked) or (_EN_ONLY.search(masked) and _names_work(masked, "")):
        return True
    return (
        _marked_work(masked, _EN_STRICT, cjk=False)
        or _marked_work(masked, _JA_STRICT, cjk=True)
        or _marked_work(masked, _ZH_STRICT, cjk=True)
    )


# --- scope ----------------------------------------------------------------------------------

_PATH_RUN = re.compile(r"[A-Za-z0-9_.*\-/@+]+")
_FILE = re.compile(r"^[\w.@+*-]*[\w*]\.[A-Za-z][A-Za-z0-9]{0,9}$")
_NOT_FILES = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
_TOOL_WORDS = re.compile(
    r"\b(?:bash|shell|apply_patch|str_replace_editor|str_replace_based_edit_tool|multiedit|notebookedit|"
    r"webfetch|websearch|exec_command|run_terminal_cmd|local_shell|mcp__\w+)\b|"
    r"\b(?:the\s{1,4})?`?(?P<named>(?-i:[A-Z]\w{1,63}))`?\s{1,4}tool\b|"
    r"(?<![\w`])`?(?P<cjk>[A-Za-z]\w{1,63})`?\s{0,4}(?:ツール|工具)",
    re.IGNORECASE,
)
_SCOPE_LEAD = re.compile(
    r"^\W*(?:in|for|inside|within|under|when\s+(?:editing|changing|working\s+on|touching|modifying|using|running)|"
    r"while\s+(?:editing|working\s+on|changing))\s+\S[^,]*,"
    r"|^[^、。]{1,60}?(?:では|については|に関しては|の中では)、"
    r"|^(?:在|对于|关于)[^，。]{1,60}?[，,]",
    re.IGNORECASE,
)
_ANAPHOR = re.compile(
    r"\b(?:it|its|them|they|this|that|these|those|there|the\s+(?:contents?|rest|order|wording|text|format(?:ting)?|"
    r"structure|names?|values?|signatures?|behaviou?r|semantics|others?|entries|items|existing\s+\w+)|"
    r"anything\s+else|everything\s+else|other\s+(?:files?|parts?|sections?|things?|lines?))\b"
    r"|内容|中身|それ|その|そこ|ここ|これ|他の|ほかの|その他|残り|順番|順序|其他|其余|它|这些|那些|里面",
    re.IGNORECASE,
)


def _path_glob(token: str) -> str | None:
    token = token.strip(".,;:!?'\"`()[]{}<>")
    if not token or "://" in token or token.casefold() in _NOT_FILES or token.startswith("-"):
        return None
    if "/" in token:
        if token.endswith("/") or "." not in token.rsplit("/", 1)[-1]:
            return token.rstrip("/") + "/**" if "*" not in token else token
        return token
    return token if _FILE.match(token) else None


def sentence_scope(sentence: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(paths, tools)`` a sentence names: path globs (a file as written, a folder as
    ``folder/**``) and tool names, each in first-seen order.

    Paths are tokens with a ``/`` or shaped like ``name.ext`` (URLs, flags and
    abbreviations such as ``e.g.`` are not); tools are known tool names (``Bash``,
    ``apply_patch``, ``mcp__…``) and ``<Name> tool`` / ``<Name>ツール`` phrases."""
    paths: dict[str, None] = {}
    for run in _PATH_RUN.findall(_mask_quotes(sentence).replace("`", " ")):
        glob = _path_glob(run)
        if glob is not None:
            paths.setdefault(glob, None)
    for span in re.findall(r"`([^`\n]+)`", sentence):
        glob = _path_glob(span.strip())
        if glob is not None:
            paths.setdefault(glob, None)
    tools: dict[str, None] = {}
    for m in _TOOL_WORDS.finditer(sentence):
        name = m.group("named") or m.group("cjk") or m.group(0)
        tools.setdefault(name.strip("`"), None)
    return tuple(paths), tuple(tools)


def _scope_source(text: str, sentences: list[Sentence], i: int) -> int | None:
    """Index of the sentence giving sentence ``i`` its scope, or ``None``."""
    own = text[sentences[i].start : sentences[i].end]
    paths, tools = sentence_scope(own)
    if paths or tools or _SCOPE_LEAD.match(own) or not _ANAPHOR.search(_mask_quotes(own)):
        return None
    for j in range(i - 1, max(i - 3, -1), -1):
        if sentences[j].block != sentences[i].block:
            return None
        candidate = text[sentences[j].start : sentences[j].end]
        cp, ct = sentence_scope(candidate)
        if cp or ct:
            return j
    return None


def constraint_passages(text: str) -> list[Passage]:
    """The constraints of a user message, in text order, each with its scope (module doc).

    Client-injected blocks are removed first
    (:func:`~contextledger.ingest.preambles.strip_injected`).  A huge message is read
    through :func:`~contextledger.limits.scan_window` (its head and tail): the work is
    bounded, whatever was pasted in the middle."""
    text = strip_injected(scan_window(text))
    sentences = prose_sentences(text)
    out: list[Passage] = []
    covered = 0  # the end of the last list taken into a passage
    for i, s in enumerate(sentences):
        if s.start < covered:
            continue
        sentence = text[s.start : s.end]
        if not is_constraint_sentence(sentence):
            continue
        end = _introduced_list_end(text, s.end) if sentence.endswith((":", "：")) else s.end
        covered = end
        j = _scope_source(text, sentences, i)
        if j is None:
            out.append(Passage(text=text[s.start : end], sentence=sentence))
            continue
        paths, tools = sentence_scope(text[sentences[j].start : sentences[j].end])
        out.append(Passage(text=text[sentences[j].start : end], sentence=sentence, scope_paths=paths, scope_tools=tools))
    return out


LIST_MAX_ITEMS = 12
"""List items a constraint ending with a colon takes with it."""

LIST_MAX_CHARS = 800
"""Characters of list a constraint ending with a colon takes with it (whole items only)."""


def _introduced_list_end(text: str, colon_end: int) -> int:
    """The end of the list a constraint sentence ending with ``:``/``：`` at
    ``colon_end`` introduces ("Do not modify these files:" then ``- src/auth.py`` …):
    the bulleted or numbered items that follow it (one blank line allowed before the
    first), with their indented continuation lines, up to :data:`LIST_MAX_ITEMS` whole
    items and :data:`LIST_MAX_CHARS`; ``colon_end`` itself when no list follows, so the
    rule keeps what it forbids or requires."""
    nl = text.find("\n", colon_end)
    if nl < 0 or text[colon_end:nl].strip():
        return colon_end
    end, items, pos, blank_ok = colon_end, 0, nl + 1, True
    while pos < len(text):
        nxt = text.find("\n", pos)
        line = text[pos : nxt if nxt >= 0 else len(text)]
        if not line.strip():
            if not (blank_ok and items == 0):
                break
            blank_ok = False
        elif BULLET.match(line):
            if items == LIST_MAX_ITEMS:
                break
            items += 1
        elif not (items and line.startswith(("  ", "\t"))):
            break
        line_end = pos + len(line.rstrip())
        if line.strip() and line_end - colon_end > LIST_MAX_CHARS:
            break
        if line.strip():
            end = line_end
        if nxt < 0:
            break
        pos = nxt + 1
    return end if items else colon_end
