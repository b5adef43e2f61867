"""Families of closed replies (issue 29): what the parser reads, and what must stay unparseable.

Each family is a category: written variants (they show the rule and fail without it) and the real instances
of the development corpus that belong to it (data/closed_replies, by id: they show the family exists). The
locked corpus part is not used here; it is only scored (test_parser_corpus.py).
"""
import json
from pathlib import Path

import pytest

from mmbu.benchmark_eval.parser import parse_closed_answer

CORPUS = Path(__file__).parent / "data" / "closed_replies" / "replies.jsonl"
CASES = {case["id"]: case for case in map(json.loads, CORPUS.read_text(encoding="utf-8").splitlines())}
CELLS = ["Monocyte", "Promyelocyte", "Proerythroblast", "Band neutrophil", "None of the above"]
ANGLES = ["30°", "45°", r"\frac{4}{3}", "60°"]
YES_NO = ["Yes", "No"]


HG = "m3cotbench/HealthGPT-M3/"
# several options, each by its text and bracketed letter, or listed one a line after the answer's marker
SEVERAL_BRACKETED = (HG + "251@", HG + "266@", HG + "259@", HG + "371@", HG + "180@")


def real(*ids: str) -> list:
    """Corpus cases by id prefix, as (reply, options, label) parameters; development cases only."""
    found = []
    for prefix in ids:
        case = CASES.get(prefix) or next(c for key, c in CASES.items() if key.startswith(prefix))
        assert case["split"] == "development", prefix
        found.append(pytest.param(case["reply"], case["options"], case["label"], id=prefix))
    return found


# a letter after a sentence that concludes on another option's value (text-davinci-002's zero-shot CoT logs)
CONCLUDED_BEFORE = ("zero-shot-cot/text-davinci-002/aqua-61@", "zero-shot-cot/text-davinci-002/aqua-247@",
                    "zero-shot-cot/text-davinci-002/date_understanding-63@",
                    "zero-shot-cot/text-davinci-002/date_understanding-252@",
                    "zero-shot-cot/text-davinci-002/date_understanding-345@")

# InstructGPT's medical chain-of-thought (vlievin/medical-reasoning): the options discussed, then one concluded on
MR = "medical-reasoning/instructgpt/"
CONCLUDED_AMONG_OTHERS = (MR + "usmle-1046-let-s-think-step-by-step@", MR + "usmle-654-let-s-work-by-elimination",
                          MR + "usmle-1044-let-s-reflect-on-each-answer-option", MR + "usmle-1118-",
                          MR + "medmcqa-cd810094-", MR + "medmcqa-fbd3b828-")
NOT_CONCLUDED = (MR + "usmle-944-", MR + "medmcqa-406dfa1b-", MR + "medmcqa-8b9b2db6-", MR + "medmcqa-d282f15c-")
TREATMENTS = ["Ampicillin and gentamicin", "Ciprofloxacin", "Obtain a radiograph", "Ceftriaxone and doxycycline"]
HEPATITIS = ["Interferon alone", "Sofosbuvir", "Liver transplant", "Observation"]

# the sixth round (aki-wada/IgakuQA-evaluation): local models on the Japanese licensing examination, options a-e
IQE = "igakuqa-evaluation/"
LFM = IQE + "liquid/lfm2.5-1.2b/"
LOWER_WITH_REASON = (IQE + "aaditya.llama3-openbiollm-70b/baseline/116A16@", IQE + "aaditya.llama3-openbiollm-70b/baseline/116A41@",
                     LFM + "japanese_medical/116A43@", LFM + "japanese_medical/116A44@", LFM + "japanese_medical/116A35@",
                     LFM + "japanese_medical/116A62@", LFM + "chain_of_thought/116A5@")
TOPIC_OF_THE_FIELD = (LFM + "chain_of_thought/116A20@", LFM + "chain_of_thought/116A43@", LFM + "chain_of_thought/116A44@",
                      LFM + "baseline/116A44@")
LONE_LETTERS = (IQE + "liquid/lfm2-24b-a2b/chain_of_thought/116A51@", LFM + "japanese_medical/116A26@")
VITAMINS = ["Thiamine", "Riboflavin", "Pyridoxine", "Cobalamin"]
FLUIDS = ["Na 154 mEq/L, Cl 154 mEq/L", "5% glucose", "Na 84 mEq/L, K 20 mEq/L", "Na 30 mEq/L, Cl 20 mEq/L"]
LUNGS = ["肺炎", "肺水腫", "無気肺", "肺胞出血"]

READ = {
    "lower_case_letter_with_a_reason_value_or_paraphrase": [
        ("c (vitamin b6)", VITAMINS, "C"), ("a. na 154 meq/l", FLUIDS, "A"),
        ("b (as the question asks for the first step)", VITAMINS, "B"), ("c: pyridoxine, i.e. vitamin b6", VITAMINS, "C"),
        ("答え: c（無気肺）", LUNGS, "C"), ("正解はcです。", LUNGS, "C"), ("d: Alveolar haemorrhage", LUNGS, "D"),
        *real(*LOWER_WITH_REASON),
    ],
    "option_text_as_the_topic_of_the_answer_field": [
        ("c: 無気肺\n答え: 無気肺は、術後に多い。", LUNGS, "C"), ("答え: 肺水腫の所見である。", LUNGS, "B"),
        *real(*TOPIC_OF_THE_FIELD),
    ],
    "reply_ends_at_an_end_of_turn_token": [
        ("c<|end|><|user|>Question: which is it?\na: x\nb: y<|end|><|assistant|>a<|end|>", LUNGS, "C"),
        ("B<|im_end|>\n<|im_start|>user\nAnd the next one? A", CELLS, "B"),
        *real(IQE + "microsoft/phi-4-reasoning-plus/japanese_medical/116A5@"),
    ],
    "option_text_concluded_among_discussed_options": [
        ("Ampicillin and gentamicin would not cover chlamydia. Ciprofloxacin is not first line here.\n\n"
         "Therefore, the most appropriate treatment is ceftriaxone and doxycycline.", TREATMENTS, "D"),
        ("Ciprofloxacin is an option, and so are ampicillin and gentamicin. The most appropriate next step is to "
         "obtain a radiograph.", TREATMENTS, "C"),
        ("Ciprofloxacin is less likely. We can conclude that ceftriaxone and doxycycline is the most appropriate "
         "choice.", TREATMENTS, "D"),
        *real(*CONCLUDED_AMONG_OTHERS),
    ],
    "option_eliminated_down_to_one": [
        ("We can eliminate A and D. That leaves us with answers B and C. This leaves us with choice C, which is "
         "the radiograph.", TREATMENTS, "C"),
        *real(MR + "medmcqa-05ae5b1d-", MR + "medmcqa-893ad532-"),
    ],
    "letter_in_a_name_beside_the_answer": [
        ("Sofosbuvir treats hepatitis C. The answer is B.", HEPATITIS, "B"),
        *real(MR + "usmle-186-", MR + "medmcqa-acfc14d7-", MR + "medmcqa-b93a261f-", MR + "usmle-124-"),
    ],
    "answer_field_other_convention": [
        ("【答案】A<eoa>", CELLS, "A"),
        ("【解析】…所以答案为B。<eoe>\n【答案】: B <eoa>", CELLS, "B"),
        ("【正确答案】D", CELLS, "D"),
        ("[Answer] C", CELLS, "C"),
        ('… the evidence supports it.\\n\\nanswer_choice": "A"}', CELLS, "A"),  # a JSON object left unfinished
        ('{"step_by_step_thinking": "…", "answer_choice": "E"}', CELLS, "E"),
        *real("gaokao/gpt-4-0314/Biology-111", "gaokao/gpt-4-0314/Math_I-115",
              "mirage/Llama-3.2-3B-Instruct/bioasq-rag_32-5c89461675a4a5d219000013"),
    ],
    "answer_as_sentence": [
        ("OPTION C IS CORRECT", CELLS, "C"),
        ("Option (B) is the correct one.", CELLS, "B"),
        ("I believe option D is right.", CELLS, "D"),
        *real("mathvista/claude/55@", "mathvista/chatgpt/858@"),
    ],
    "values_of_a_derivation_before_the_letter": [
        ("Half of 90° is 45°, and a third of that is 30°.\nSo the angle needed is the other one.\nThe answer is D.",
         ANGLES, "D"),
        ("The angle is 45°, the answer is B.", ANGLES, "B"),  # the value and the letter in one sentence agree
        *real("zero-shot-cot/text-davinci-002/aqua-101@", "zero-shot-cot/text-davinci-002/aqua-136@",
              "zero-shot-cot/text-davinci-002/commonsensqa-218@", "zero-shot-cot/text-davinci-002/date_understanding-70@"),
    ],
    "answer_first_then_rejected_options": [
        ("The correct answer is (C).\n\nChoice (A) is incorrect because it is too small.\n"
         "Choice (B) would be correct only if the nucleus were round.\nOption D is wrong.", CELLS, "C"),
        ("Answer: B. A is wrong since the nucleus is round, C would be correct if it were larger, D is not.", CELLS, "B"),
        *real("mathvista/bard/293@", "mathvista/idefics/446@", "mathvista/bard/566@"),
    ],
    "option_text_in_a_sentence": [
        ("So the angle is $30^{\\circ}$.", ANGLES, "A"),
        ("so the angle equals 45 degrees.", ANGLES, "B"),
        ("The ratio therefore is 4/3.", ANGLES, "C"),
        ("A decrease in sunlight would directly affect the band neutrophil, as it …", CELLS, "D"),
        *real("mathvista/llava/255@", "mathvista/llava/504@", "mathvista/llava/698@", "mathvista/mplugowl/819@",
              "mathvista/llavar/291@", "mathvista/llama_adapter_v2/279@"),
    ],
    "boxed_option_text": [
        (r"x = \boxed{\frac{4}{3}}", ANGLES, "C"),
        (r"\boxed{30^\circ}", ANGLES, "A"),
        (r"\boxed{4/3}", ANGLES, "C"),
        (r"The correct answer is **(C).** … so the angle is $\boxed{110^\circ}$.", ANGLES, "C"),  # a value, no option
    ],
    "letter_then_a_lower_case_word": [  # "C and E" joins labels; "B, a cell and …" is one label and words
        ("B, a promyelocyte and not a monocyte.", CELLS, "B"),
        ("The answer is D, a band neutrophil and no other cell.", CELLS, "D"),
    ],
    "lower_case_letter_with_text": [
        ("answer: b. promyelocyte", CELLS, "B"),
        ("(b) promyelocyte", CELLS, "B"),
        ("c) proerythroblast", CELLS, "C"),
    ],
    # HealthGPT-M3's medical chain-of-thought (juntaoJianggavin/M3CoTBench): the option's text, then its letter in brackets
    "option_text_then_its_bracketed_letter": [
        ("Based on the image, the most likely diagnosis is a band neutrophil (D). The nucleus is curved.", CELLS, "D"),
        ("The most appropriate option would be promyelocyte (B). Monocyte (A) is less likely.", CELLS, "B"),
        ("Therefore, the cell is most likely a monocyte (A).", CELLS, "A"),
        *real(HG + "17@", HG + "236@", HG + "661@", HG + "1004@"),
    ],
    # MathVista's released outputs (LLaVA, LLaVAR, mPLUG-Owl, LLaMA-Adapter): a value stated by "=" closing the reply,
    # or with the unit every option carries written the reply's own way
    "value_stated_by_equals_or_own_unit": [
        ("Based on the given information, we can determine that ∠C = 85°.", ANGLES + ["85°"], "E"),
        ("∴ ∠BDC = 45°", ANGLES, "B"),
        ("The distance between A and B is 20 meters.", ["10m", "20m", "35m", "40m"], "B"),
        ("The length of the ladder is 4.40 meters.", ["3.85米", "4.00米", "4.40米", "4.50米"], "C"),
        *real("mathvista/llava/30@output_llava", "mathvista/mplugowl/528@", "mathvista/llama_adapter_v2/322@",
              "mathvista/llava/141@", "mathvista/llavar/587@", "mathvista/llavar/68@"),
    ],
    # ChatGPT's and GPT-4's Chinese replies: "选项X正确", "选项：(X) text", "答案是A（62°）"
    "chinese_option_marker": [
        ("所以∠2的度数为45°。\n选项：(B) 45°", ANGLES, "B"),
        ("所以，∠3 = 45°，选项B正确。", ANGLES, "B"),
        ("因此，答案是B（45°）。", ANGLES, "B"),
        *real("mathvista/chatgpt/149@output_chatgpt.json", "mathvista/chatgpt/290@output_chatgpt.json",
              "mathvista/chatgpt/707@output_chatgpt.json", "mathvista/gpt4/970@output_gpt4_2shot_solution.json"),
    ],
    "yes_no_option_text": [
        ("No.", YES_NO, "B"),
        ("The answer is no.", YES_NO, "B"),
        ("Yes, because the bar is taller.", YES_NO, "A"),
        *real("mathvista/llama_adapter_v2/994@", "mathvista/mplugowl/12@", "mathvista/llama_adapter_v2/344@"),
    ],
}


@pytest.mark.parametrize(("reply", "options", "label"),
                         [pytest.param(*case, id=f"{family}-{i}") if not hasattr(case, "values") else case
                          for family, cases in READ.items() for i, case in enumerate(cases)])
def test_families_the_parser_reads(reply, options, label):
    assert parse_closed_answer(reply, options).label == label


UNPARSEABLE = {
    "several_letters_in_one_answer": [
        (r"\boxed{A, C}", CELLS), (r"\boxed{AC}", CELLS), ("【答案】AC <eoa>", CELLS), ("【答案】A、B、C、D <eoa>", CELLS),
        ("The answer is (A) and (B).", CELLS), ("Answer: B, D", CELLS), ("The answer is A or C.", CELLS),
        # three letters, the last two joined by a word: "C and" is no label followed by a word ("B, a cell …")
        ("A, C and E", CELLS), ("The answer is A, C and E.", CELLS), ("Answer: B, D or E", CELLS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real("gaokao/gpt-4-0314/Physics-3",
                                                                           "gaokao/gpt-4-0314/History-38")],
    ],
    "ordering_of_options": [
        ("B > A > C > D", CELLS), ("Ranking: C, A, D, B", CELLS), ("1. C\n2. A\n3. B\n4. D", CELLS),
        ("The order from most to least likely is C, A, B, D.", CELLS), ("Most likely to least likely: C > A > B", CELLS),
    ],
    "letter_with_another_options_text": [
        ("Answer: B) Monocyte", CELLS), ("The answer is (B) 30°", ANGLES), ("The answer is B (monocyte).", CELLS),
    ],
    "letter_then_another_options_value": [
        ("The answer is (A). Since both halves are equal, the angle is 45°.", ANGLES),
        ("Answer: B\nTherefore the answer is 30°.", ANGLES),
        ("The correct option letter is C. The area is 60°.", ANGLES),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real("mathvista/bard/94@",
                                                                           "mathvista/mplugowl/256@")],
    ],
    "value_concluded_just_before_another_letter": [
        ("So the angle is 30°.\nTherefore, among A through D, the answer is B.", ANGLES),
        ("The cell would be a monocyte. The answer is (C).", CELLS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real(*CONCLUDED_BEFORE)],
    ],
    "letter_inside_a_name": [
        ("Sofosbuvir for hepatitis C is the most appropriate next step.", HEPATITIS),
        ("Thiamine, vitamin B is the most likely deficiency.", CELLS), ("Blood type A is the most likely.", CELLS),
        ("A protein-C is the most likely cause.", CELLS),
    ],
    "options_ranked_or_concluded_twice": [
        ("1) The most likely treatment is ciprofloxacin.\n2) The next most likely is ceftriaxone and doxycycline.",
         TREATMENTS),
        ("Therefore, it is ciprofloxacin. Ampicillin and gentamicin work too. Therefore, it is ampicillin and "
         "gentamicin.", TREATMENTS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real(*NOT_CONCLUDED)],
    ],
    "several_options_by_text_and_bracketed_letter": [
        ("The most likely causes are a monocyte (A) and a promyelocyte (B).", CELLS),
        ("The most likely cell is a monocyte (A) or a promyelocyte (B).", CELLS),
        ("The appropriate answers would be:\n\nA. Monocyte: round nucleus.\n\nC. Proerythroblast: deep blue.", CELLS),
        ("The correct answer is:\nB. Promyelocyte\nD. Band neutrophil", CELLS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real(*SEVERAL_BRACKETED)],
    ],
    "value_stated_then_no_answer": [
        ("所以∠BEC=∠BED=45°，∠AED=90°，所以这个选择题没有正确答案。", ANGLES),
        ("angle_2 = 45\nprint(angle_2)", ["30", "45", "60", "90"]),
        ("∠E in this diagram is 40°, not 45°.", ANGLES),
        ("选项：\n(A) 30°\n(B) 45°", ANGLES),
        ("选项(B)不正确", ANGLES),
    ],
    "lower_case_letter_then_a_second_letter_or_another_option": [
        ("bとc", LUNGS), ("答え: aとd", LUNGS), ("b, c\n\n正しい答えはbとcです。", LUNGS), ("c (thiamine)", VITAMINS),
        ("a: 肺炎\n\nこの所見では無気肺が最も可能性が高い。", LUNGS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real(LFM + "baseline/116A41@",
                                                                           LFM + "japanese_medical/116A48@")],
    ],
    "lower_case_words_that_are_no_label": [
        ("e.g. a cell with a round nucleus", CELLS), ("a cell with a round nucleus", CELLS), ("i.e. not sure", CELLS),
        ("答え: 無気肺は、肺炎と区別しにくい。", LUNGS),  # the topic's sentence names a second option
    ],
    "lone_letters_one_a_line": [
        ("A\nB\nC\nD", CELLS), ("A\nB", CELLS), ("b\ne", CELLS), ("The options are\nA\nB", CELLS),
        *[pytest.param(p.values[0], p.values[1], id=p.id) for p in real(*LONE_LETTERS)],
    ],
    "refusal_that_starts_with_an_option_text": [
        ("No, I cannot tell from the image.", YES_NO), ("Yes, I can help with that.", YES_NO),
    ],
}


@pytest.mark.parametrize(("reply", "options"),
                         [pytest.param(*case, id=f"{family}-{i}") if not hasattr(case, "values") else case
                          for family, cases in UNPARSEABLE.items() for i, case in enumerate(cases)])
def test_families_that_stay_unparseable(reply, options):
    parsed = parse_closed_answer(reply, options)
    assert parsed.label is None, parsed.path


def test_the_real_instances_are_labelled_as_the_tests_expect():
    """The corpus labels agree with the families they are quoted for (no test rests on a mislabelled case)."""
    for prefix in ("mathvista/bard/94@", "mathvista/mplugowl/256@", "gaokao/gpt-4-0314/Physics-3",
                   "gaokao/gpt-4-0314/History-38", *CONCLUDED_BEFORE, *NOT_CONCLUDED, *SEVERAL_BRACKETED,
                   *LONE_LETTERS, LFM + "baseline/116A41@", LFM + "japanese_medical/116A48@"):
        assert (CASES.get(prefix) or next(c for k, c in CASES.items() if k.startswith(prefix)))["label"] is None
