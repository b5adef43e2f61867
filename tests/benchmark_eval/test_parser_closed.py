"""The closed-answer parser: strict, layered, never guessing (docs/architecture.md §4 "Scoring")."""
import pytest

from mmbu.benchmark_eval.parser import ReasoningMarkers, option_labels, parse_closed_answer

OPTIONS = ["Monocyte", "Promyelocyte", "Proerythroblast", "Band neutrophil", "None of the above"]


@pytest.mark.parametrize(
    ("output", "label", "path"),
    [
        ("B", "B", "response:label"),
        ("(b)", "B", "response:label"),
        ("**B**", "B", "response:label"),
        ("Ｂ", "B", "response:label"),  # full-width letter
        ("（Ｃ）", "C", "response:label"),
        ("B. Promyelocyte", "B", "response:label_with_text"),
        ("B) Promyelocyte", "B", "response:label_with_text"),
        ("Option D: Band neutrophil", "D", "response:label_with_text"),
        ("Monocyte", "A", "response:option_text"),
        ("band NEUTROPHIL.", "D", "response:option_text"),
        ("none of the above", "E", "response:option_text"),
        ("B, because the nucleus is round", "B", "response:label"),
        ("Answer: C", "C", "answer_field:label"),
        ("ANSWER: B\nsome words\nAnswer: D", "D", "answer_field:label"),  # last wins
        ("Final answer: (e)", "E", "answer_field:label"),
        ("Correct option: B", "B", "answer_field:label"),
        ("## Final choice = D. Band neutrophil", "D", "answer_field:label_with_text"),
        ("**Answer:** **B**", "B", "answer_field:label"),
        ("Answer:\n\n**C**", "C", "answer_field:label"),
        ('{"answer": "B"}', "B", "json_answer:label"),
        ('```json\n{"answer": "E. None of the above"}\n```', "E", "json_answer:label_with_text"),
        ('{"answer": "A"}\nthen later\nAnswer: C', "C", "answer_field:label"),
        ("Answer: B. Option C is wrong", "B", "answer_field:label_with_text"),
        ("<answer>A</answer>", "A", "answer_tag:label"),
        ("so \\boxed{\\text{C}}", "C", "answer_tag:label"),
        ("The answer is (B).", "B", "final_phrase:label"),
        ("the correct answer is Promyelocyte", "B", "final_phrase:option_text"),
        ("The answer is a monocyte.", "A", "final_phrase:option_text"),
        ("I choose D", "D", "final_phrase:label"),
        ("A is correct.", "A", "label_first:label"),
        ("It might be A or B. After looking again, the answer is B.", "B", "final_phrase:label"),
        ("The answer is B. This option is not ideal though", "B", "final_phrase:label_with_text"),
        ("<think>The answer is A? no.</think>\nB", "B", "response:label"),
        ("reasoning without the opening tag</think>C", "C", "response:label"),
        ("- D. Band neutrophil", "D", "ordered_list:label_with_text"),
        ("Promyelocyte\nThe nucleus is large with a prominent nucleolus.", "B", "response:option_text"),
    ],
)
def test_reads_the_label(output, label, path):
    parsed = parse_closed_answer(output, OPTIONS)
    assert (parsed.label, parsed.path) == (label, path)
    assert parsed.parsed


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("", "unparseable:empty_output"),
        (None, "unparseable:empty_output"),
        ("A cell in the center is a monocyte-like cell.", "unparseable:no_answer"),  # article, not option A
        ("A, B", "unparseable:response:multiple_labels"),
        ("(B) or (C)", "unparseable:response:multiple_labels"),
        ("B or C", "unparseable:response:multiple_labels"),
        ("Answer: F", "unparseable:answer_field:invalid_label"),  # only five options
        ("Z", "unparseable:response:invalid_label"),
        ("B. Monocyte", "unparseable:response:conflicting_text"),  # letter and text disagree
        ("Answer: I am not sure", "unparseable:answer_field:no_label"),
        ("Answer: B\nAnswer: maybe", "unparseable:answer_field:no_label"),  # last explicit answer wins
        ("A. Monocyte\nB. Promyelocyte\nC. Proerythroblast\nD. Band neutrophil\nE. None of the above",
         "unparseable:response:multiple_labels"),
        ("1. A. Monocyte\n2. B. Promyelocyte\n3. C. Proerythroblast\n4. D. Band neutrophil\n5. E. None of the above",
         "unparseable:ordered_list:option_echo"),
        ("Monocytes", "unparseable:no_answer"),  # not exactly an option's text
        ("1. C\n2. A\n3. B", "unparseable:ordered_list:multiple_labels"),
        ("- D. Band neutrophil\n- A. Monocyte", "unparseable:ordered_list:multiple_labels"),
        # a list that goes through the options is a review, not an answer
        ("Considering the options:\n- A) Monocyte: unlikely, the nucleus is not kidney-shaped", "unparseable:no_answer"),
        ("<think>I would say B</think>", "unparseable:empty_output"),
        ("<think>still thinking about B and C ...", "unparseable:empty_output"),  # never reached an answer
    ],
)
def test_refuses_to_guess(output, reason):
    parsed = parse_closed_answer(output, OPTIONS)
    assert parsed.label is None and not parsed.parsed
    assert parsed.path == reason


def test_labels_follow_this_samples_option_count():
    three = OPTIONS[:3]
    assert parse_closed_answer("C", three).label == "C"
    assert parse_closed_answer("D", three).path == "unparseable:response:invalid_label"
    seven = OPTIONS + ["Myeloblast", "Plasma cell"]
    assert parse_closed_answer("The answer is G", seven).label == "G"
    assert option_labels(7) == ("A", "B", "C", "D", "E", "F", "G")
    with pytest.raises(ValueError):
        option_labels(0)


def test_option_text_that_looks_like_a_label_is_read_as_text():
    options = ["S. aureus", "E. coli", "K. pneumoniae", "None of the above", "P. aeruginosa"]
    assert parse_closed_answer("E. coli", options).label == "B"
    assert parse_closed_answer("E. P. aeruginosa", options).label == "E"


def test_duplicate_option_texts_are_not_matched_by_text():
    options = ["Monocyte", "monocyte", "Promyelocyte"]
    assert parse_closed_answer("Monocyte", options).label is None
    assert parse_closed_answer("C", options).label == "C"


def test_detection_options_are_boxes():
    options = ["[10, 20, 30, 40]", "[50, 60, 70, 80]", "[0, 0, 5, 5]", "None of the above"]
    assert parse_closed_answer("[50, 60, 70, 80]", options).label == "B"
    assert parse_closed_answer("Answer: C", options).label == "C"


# --- the forms issue 12 lists (the spec's own examples), one rule each --------------------------

@pytest.mark.parametrize(
    ("output", "label", "rule"),
    [
        # letters wrapped in LaTeX or Markdown, also inside an Answer: line
        ("Answer: \\boxed{C}", "C", "answer_tag"),
        ("**Final Answer:** \\boxed{C}", "C", "answer_tag"),
        ("Answer: $C$", "C", "answer_field"),
        ("Answer: \\(C\\)", "C", "answer_field"),
        ("\\[\\text{Answer: C}\\]", "C", "answer_field"),
        ("so it is \\textbf{C}", "C", "copula"),
        ("Answer: \\( \\text{(B)}\\ \\)", "B", "answer_field"),
        ("Therefore \\boxed{\\text{Answer: (C)}}", "C", "answer_field"),
        ("the answer is <|begin_of_box|>C<|end_of_box|>", "C", "answer_tag"),
        # an answer line holding the letter plus words
        ("Answer: C because the nucleus is round", "C", "answer_field"),
        ("Answer: I think it is C", "C", "copula"),  # the copula inside the line reads it
        ("Answer: the nucleus suggests (C), a proerythroblast", "C", "answer_field"),
        ("Answer: (C) the nucleus", "C", "answer_field"),
        ("Answer: not sure yet.\nThe answer is (C).", "C", "final_phrase"),
        # the last explicit commitment, also mid-line
        ("Answer: A\nActually, the answer is B.", "B", "final_phrase"),
        ("Answer: A\nWait, that is wrong. The correct answer is B.", "B", "final_phrase"),
        ("I first thought the answer is A, but the answer is B.", "B", "final_phrase"),
        ("Let me check: Answer: A ... no. Answer: B", "B", "answer_field"),
        # phrasings
        ("The most likely diagnosis is (B).", "B", "copula"),
        ("I'd go with B.", "B", "final_phrase"),
        ("B is the most likely answer.", "B", "label_first"),
        ("Conclusion: (B)", "B", "answer_field"),
        ("The correct option is **D**.", "D", "final_phrase"),
        ("The cells are large and round.\nThe nucleus is central.\nB", "B", "last_line"),
        # answer markers in other languages (zh/ko/de quoted from real replies in the corpus;
        # fr/es/ja written here, as no public reply in those languages was found)
        ("所以答案是 (C)。", "C", "final_phrase"),
        ("答案：C", "C", "answer_field"),
        ("正确选项为 C", "C", "final_phrase"),
        ("답은 (C) 입니다", "C", "final_phrase"),
        ("정답: C", "C", "answer_field"),
        ("Die richtige Antwort ist (C).", "C", "final_phrase"),
        ("Antwort: C", "C", "answer_field"),
        ("La bonne réponse est (C).", "C", "final_phrase"),
        ("Réponse : C", "C", "answer_field"),
        ("La respuesta correcta es (C).", "C", "final_phrase"),
        ("Respuesta: C", "C", "answer_field"),
        ("答えは (C) です。", "C", "final_phrase"),
        ("答え：C", "C", "answer_field"),
        # an option's text stated as the answer
        ("The cell in the centre is a monocyte.", "A", "stated_text"),
    ],
)
def test_issue_12_forms(output, label, rule):
    parsed = parse_closed_answer(output, OPTIONS)
    assert (parsed.label, parsed.rule) == (label, rule), parsed.path


@pytest.mark.parametrize(
    "output",
    [
        "It is either B or C.",
        "The answer is B or C.",
        "(B) (C)",
        "Answer: A, C",
        "Considering the options:\n- A) Monocyte — unlikely.\n- B) Promyelocyte — possible.",
        "(A) is correct. (C) is correct.",
        "因此正确答案是:\nB C",
        "(A) und (B) sind korrekt.",
        "I'm sorry, I can't determine the answer from this image.",
        "Let's look at why the other options are less likely:\n\n*   **A)",  # a list cut off
        "The cell is not a monocyte.",
        "The cell looks monocyte-like.",
        "No. 5: Is the cell a monocyte?",
    ],
)
def test_hedges_reviews_and_non_answers_stay_unparseable(output):
    assert parse_closed_answer(output, OPTIONS).label is None


@pytest.mark.parametrize(
    ("output", "label"),
    [
        ("A is wrong.", None),
        ("B is incorrect.", None),
        ("C is not correct.", None),
        ("D is unlikely.", None),
        ("B would be wrong", None),
        ("C (unlikely)", None),
        ("A, incorrect", None),
        ("B is not the answer", None),
        ("Answer: A is wrong", None),
        ("A is correct.", "A"),  # the verdict for it
        ("B is no doubt the answer", "B"),
        ("A, not B", "A"),  # a contrast keeps the first label
        ("C (not D)", "C"),
        ("B, not option C.", "B"),
        ("D since B is wrong", "D"),
        ("The answer is A, not B.", "A"),
    ],
)
def test_a_reply_that_opens_with_a_label_and_rejects_it_is_not_read_as_choosing_it(output, label):
    """A reply's opening label followed by a verdict against it is no answer (lenient parsers read "A is wrong." as A,
    scoring a model that rejects the right option as if it chose it); a contrast with another label is an answer."""
    parsed = parse_closed_answer(output, OPTIONS)
    assert parsed.label == label, parsed.path
    if label is None:
        assert parsed.path.endswith(":verdict_against"), parsed.path


@pytest.mark.parametrize(
    ("output", "label"),
    [
        ("I don't think the answer is A.", None),
        ("I do not believe that B is correct.", None),
        ("I doubt that the answer is C.", None),
        ("I'm not sure whether the answer is D.", None),
        ("I don't think it is A.", None),
        ("I don't think the most likely diagnosis is B.", None),
        ("I don't think A is correct; the answer is C.", "C"),  # the denial covers its own clause only
        ("I'm not sure, but the answer is C.", "C"),  # a hedge that still commits
        ("I don't know. The answer is B.", "B"),
        ("I think the answer is A.", "A"),
    ],
)
def test_a_commitment_its_own_clause_denies_is_none(output, label):
    parsed = parse_closed_answer(output, OPTIONS)
    assert parsed.label == label, parsed.path


@pytest.mark.parametrize(
    ("output", "label"),
    [
        ("The answer is A. Wait, actually it's B.", "B"),  # the correction is the last commitment
        ("It's not B, it's C.", "C"),
        ("That's D.", "D"),
        ("it’s C.", "C"),
        ("It's B or C.", None),
        ("It's A cell.", None),  # an article, not a label
        ("Let's B.", None),
    ],
)
def test_a_contracted_copula_commits_like_is(output, label):
    parsed = parse_closed_answer(output, OPTIONS)
    assert parsed.label == label, parsed.path


def test_an_option_text_with_a_sign_is_read_only_with_that_sign():
    status = ["HER2+", "Triple negative", "Luminal A"]
    assert parse_closed_answer("HER2+", status).label == "A"
    assert parse_closed_answer("The answer is HER2-.", status).label is None  # not option A
    assert parse_closed_answer("HER2-", status).label is None
    signs = ["ER+", "ER-"]
    assert parse_closed_answer("ER-", signs).label == "B" and parse_closed_answer("er+", signs).label == "A"
    assert parse_closed_answer("B) ER−", signs).label == "B"  # U+2212 MINUS SIGN


@pytest.mark.parametrize(
    ("output", "label"),
    [
        ("Answer: A\n\nActually no, it is not A.", None),  # the answer taken back
        ("(A) is correct. It is not A.", None),
        ("The answer is B, Promyelocyte. It's not (B).", None),
        ("A\nIt is not A", None),  # the first-line fallback too
        ("Answer: A\nIt is not A. The answer is C.", "C"),  # a later answer stands
        ("The answer is A. It is not B.", "A"),  # another label ruled out: the answer stays
        ("It is not D.", None),  # nothing to take back, and no answer
    ],
)
def test_it_is_not_the_label_just_committed_to_takes_that_answer_back(output, label):
    parsed = parse_closed_answer(output, OPTIONS)
    assert parsed.label == label, parsed.path
    if label is None and "D." not in output:
        assert parsed.path.endswith(":retracted"), parsed.path


def test_single_letter_and_number_option_texts():
    letters = ["D", "C", "A", "B"]  # MMMU-Pro "which view" questions: the images are labelled in shuffled order
    assert parse_closed_answer("Option (A) aligns with the top view.\n\nAnswer: C", letters).label == "C"
    assert parse_closed_answer("(D) D", ["A", "B", "C", "D"]).label == "D"
    numbers = ["7", "6", "5", "4"]
    assert parse_closed_answer("最终正确选项是 \\boxed{4}。", numbers).label == "D"
    assert parse_closed_answer("(C) 5", numbers).label == "C"
    assert parse_closed_answer("(C) 7", numbers).path == "unparseable:response:conflicting_text"
    ten = [f"option {i}" for i in range(10)]
    assert parse_closed_answer("The answer is C because I computed the integral.", ten).label == "C"


def test_reasoning_markers_of_each_family():
    medgemma = ReasoningMarkers((("<unused94>", "<unused95>"),))
    reply = "<unused94>thought\nThe answer is A? The nucleus…<unused95>The answer is (B)."
    assert parse_closed_answer(reply, OPTIONS, medgemma).label == "B"
    assert parse_closed_answer("<unused94>thought\nThe answer is A, I think", OPTIONS, medgemma).label is None
    prefilled = ReasoningMarkers((("<think>", "</think>"),), prefilled=True)
    assert parse_closed_answer("So the answer should be C.\n</think>\n\nC", OPTIONS, prefilled).label == "C"
    # the template opened <think>; no close marker means the model never reached an answer
    unfinished = "So the correct answer would be C) Proerythroblast. Wait, but"
    assert parse_closed_answer(unfinished, OPTIONS, prefilled).path == "unparseable:empty_output"
    assert parse_closed_answer(unfinished, OPTIONS).label == "C"  # without the family's markers it looks answered


def test_every_parse_names_its_rule():
    parsed = parse_closed_answer("Answer: A\nActually, the answer is B.", OPTIONS)
    assert parsed.rule == "final_phrase" and parsed.path == "final_phrase:label"
    assert parse_closed_answer("Answer: F", OPTIONS).rule == "answer_field"
