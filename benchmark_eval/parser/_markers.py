"""The words that mark an answer, per language, as regular-expression fragments (data, not logic).

Models answer in the prompt's language or slip into their training languages: English, Chinese,
Korean, German, French, Spanish, Japanese (and Portuguese/Italian forms that share a stem).
Each list is one kind of marker; :mod:`._closed` turns them into patterns.
"""
from __future__ import annotations

# "Answer: C", "Final answer = C", "答案：C", "정답: C", "Antwort: C", "Réponse : C", "Respuesta: C",
# "答え：C". A field holds its value after ":" or "=" (or on the next line when the line ends there).
FIELD_KEYS = (
    r"(?:final|correct|best|right|my|chosen|selected)\s+(?:answer|option|choice|response)",
    r"answer(?:[_ ](?:choice|option|letter|label))?[\"']?",  # also a JSON key that is not valid JSON: "answer_choice": "A"
    r"conclusion",
    r"最终答案|正确答案|答案|正确选项|最终选项|答",
    r"최종\s*정답|정답|답변|답",
    r"(?:endgültige|richtige|korrekte)\s+antwort|antwort|lösung",
    r"(?:la\s+)?(?:bonne\s+)?réponse(?:\s+finale|\s+correcte)?",
    r"(?:la\s+)?respuesta(?:\s+final|\s+correcta)?",
    r"(?:a\s+)?resposta(?:\s+final|\s+correta)?|(?:la\s+)?risposta(?:\s+finale|\s+corretta)?",
    r"答え|正解|解答|回答",
)

# "the answer is C", "I'd go with C", "答案是 C", "정답은 C", "Die richtige Antwort ist C",
# "La réponse est C", "La respuesta correcta es C", "答えは C". The answer follows the phrase.
_HEDGE = r"(?:\s+(?:likely|probably|most\s+likely|clearly|therefore|thus|then|indeed|definitely))?"
PHRASES = (
    r"(?:final|correct|best|right|most\s+(?:likely|appropriate|accurate|probable|suitable|fitting|plausible)\s+)?"
    r"(?:answer|option|choice|response)\s+(?:here\s+)?(?:is|would\s+be|should\s+be|will\s+be|must\s+be)" + _HEDGE,
    r"(?:the\s+)?answer\s+(?:to\s+(?:this|the)\s+question\s+)?is" + _HEDGE,
    r"\bI\s*(?:would|'d|will|'ll|must)?\s*(?:choose|select|pick|go\s+with|opt\s+for)",
    r"\b(?:my|our)\s+(?:final\s+)?(?:answer|choice|pick|selection)\s+(?:is|would\s+be)",
    # elimination: "This leaves us with choice C, which is …", "That leaves us with answer B) as the only correct answer"
    r"\b(?:this|that|which)\s+leaves\s+(?:us\s+with\s+)?(?:only\s+)?",
    r"(?:正确|最终|最佳|最合适的)?(?:答案|选项|選項)(?:应该|应当|应)?(?:是|为|為)|(?:应该|应|故|所以|因此|答案)选(?![项择])|选择(?!题)"
    r"|(?:正确|错误|不正确)的(?:说法|选项|答案|陈述)?(?:是|为|有)"
    r"|(?:^|(?<=[\s。，,.;；]))选项(?=\s*:?\s*[(\[]?[A-Z](?![A-Za-z]))"  # "选项：(D) 105°", "选项(B) 35°。" closing a reply
    r"|(?:最接近|最相近|最符合|相符|匹配|对应)的?(?:选项|答案)?(?:是|为)?",
    r"정답은|답은|옵션은|선택지는",
    r"(?:die\s+)?(?:richtige|korrekte|zutreffende|beste|wahrscheinlichste)\s+(?:antwort|option|aussage|wahl|lösung)"
    r"\s+(?:ist|lautet|wäre)|(?:die\s+)?antwort\s+(?:ist|lautet)|ich\s+wähle",
    r"(?:la\s+)?(?:bonne\s+)?réponse\s+(?:correcte\s+)?(?:est|serait)|la\s+(?:bonne\s+|meilleure\s+)?option\s+est"
    r"|je\s+choisis",
    r"(?:la\s+)?respuesta\s+(?:correcta\s+)?(?:es|sería)|la\s+(?:opción|alternativa)\s+correcta\s+es|elijo",
    r"(?:a\s+)?resposta\s+(?:correta\s+)?é|(?:la\s+)?risposta\s+(?:corretta\s+)?è",
    r"答えは|正解は|解答は",
)

# "C is correct", "(C) is the most likely answer", "Option C ist richtig", "(C) 是正确的".
LABEL_FIRST_TAILS = (
    r"(?:is|would\s+be|seems\s+to\s+be|appears\s+to\s+be)\s+(?:the\s+)?(?:correct|right|best|most\s+(?:likely|"
    r"appropriate|accurate|probable|suitable|fitting|plausible|correct))(?:\s+(?:answer|option|choice|response|one))?\b",
    r"(?:ist|wäre)\s+(?:die\s+)?(?:richtig|korrekt|richtige\s+antwort|korrekte\s+antwort)",
    r"(?:est|serait)\s+(?:la\s+)?(?:correcte|bonne\s+réponse)|es\s+(?:la\s+)?(?:correcta|respuesta\s+correcta)",
    r"(?:(?:是|为)(?:正确的?|最佳|最合适的?)|正确)(?:答案|选项)?",  # "选项A正确", "(B) 是正确的"
)

# "(A) und (B) sind korrekt", "A and C are correct": a verdict on several options at once.
JOINED_VERDICT_TAILS = (
    r"(?:are|were)\s+(?:both\s+|all\s+)?(?:correct|right|true)",
    r"sind\s+(?:beide\s+|alle\s+)?(?:richtig|korrekt)",
    r"(?:都|均)?(?:是)?正确",
)

# Belief denied in the clause that leads to a phrase, label or copula: "I don't think the answer is A",
# "I doubt that A is correct", "I'm not sure whether it is B" (a bare "I'm not sure, but the answer is C" commits).
DENIALS = (r"\b(?:do|does|did|would|could)\s*(?:n't|not)\s+(?:think|believe|say|agree)\b"
           r"|\b(?:doubt|not\s+sure|unsure|uncertain)\s+(?:that|if|whether)\b"
           r"|\bich\s+glaube\s+nicht\b|\bje\s+ne\s+pense\s+pas\b|\bno\s+creo\s+que\b|不认为|不觉得")

# Words that only announce the answer on the next line ("Die Antwort ist also:", "the answer is therefore:").
FILLERS = r"(?:also|thus|therefore|hence|then|as\s+follows|daher|somit|folglich|donc|ainsi|por\s+lo\s+tanto|如下|是)"

# Copulas after which a well-formed label is a commitment: "the most likely diagnosis is (B)".
COPULAS = r"(?:is|would\s+be|should\s+be|will\s+be|ist|wäre|lautet|est|serait|es|sería|是|为|為|は)"

# Words after which a bare capital letter still opens a verdict ("so C is correct", "answer C is the most correct");
# after any other word it ends a name ("hepatitis C is the most appropriate …", "vitamin B is …", "type A").
VERDICT_LEAD_WORDS = frozenset((
    "then", "so", "thus", "therefore", "hence", "and", "or", "but", "that", "think", "believe", "say", "says",
    "conclude", "guess", "letter", "option", "options", "choice", "choices", "answer", "answers", "whereas", "while",
    "because", "since", "why", "clearly", "certainly", "definitely", "probably", "likely", "perhaps", "maybe",
    "obviously", "only", "also", "now", "finally", "here", "which", "if", "as", "however", "overall",
    "daher", "und", "oder", "dass", "donc", "et", "ou", "que", "entonces", "y", "o",
))

# Subjects whose copula introduces something other than an answer ("the options are A) …").
NOT_ANSWER_SUBJECTS = r"(?:options?|choices?|following|list|question)\s*$"

# Word stems (lower case) at least one of which every marker above contains: lines without any are
# not searched (most lines of a chain of thought), which keeps the parser fast on long replies.
STEMS = (
    "answer", "option", "choice", "respon", "conclusion", "choose", "select", "pick", "go with", "opt for",
    "correct", "right", "true", "best", "most ", "leaves", "antwort", "lösung", "aussage", "wahl", "wähle", "richtig",
    "korrekt", "réponse", "reponse", "choisis", "respuesta", "opción", "alternativa", "elijo", "resposta",
    "risposta", "答", "选", "選", "正确", "正確", "错误", "錯誤", "说法", "最", "相符", "匹配", "对应", "정답", "답",
    "옵션", "선택", "正解", "解答", "回答", "✅", "✔", "☑",
)
# The stems of the verdict words ("C is correct", "(A) und (B) sind korrekt", "B) … — ✅ Correct"): the verdict
# patterns search only the lines that hold one.
VERDICT_STEMS = (
    "correct", "right", "true", "best", "most", "appropriate", "richtig", "korrekt", "bonne", "正确", "正確", "最佳", "最合适",
    "✅", "✔", "☑",
)
