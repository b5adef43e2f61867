"""The closed-answer parser: strict, layered, never guessing (DESIGN §4 "Scoring")."""
import pytest

from mmbu.benchmark_eval.parser import option_labels, parse_closed_answer

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
        ('{"answer": "B"}', "B", "answer_field:label"),
        ('```json\n{"answer": "E. None of the above"}\n```', "E", "answer_field:label_with_text"),
        ('{"answer": "A"}\nthen later\nAnswer: C', "C", "answer_field:label"),
        ("Answer: B. Option C is wrong", "B", "answer_field:label_with_text"),
        ("<answer>A</answer>", "A", "answer_tag:label"),
        ("so \\boxed{\\text{C}}", "C", "answer_tag:label"),
        ("The answer is (B).", "B", "final_phrase:label"),
        ("the correct answer is Promyelocyte", "B", "final_phrase:option_text"),
        ("The answer is a monocyte.", "A", "final_phrase:option_text"),
        ("I choose D", "D", "final_phrase:label"),
        ("A is correct.", "A", "final_phrase:label"),
        ("It might be A or B. After looking again, the answer is B.", "B", "final_phrase:label"),
        ("The answer is B. This option is not ideal though", "B", "final_phrase:label_with_text"),
        ("<think>The answer is A? no.</think>\nB", "B", "response:label"),
        ("reasoning without the opening tag</think>C", "C", "response:label"),
        ("1. C\n2. A\n3. B", "C", "ordered_list:label"),
        ("- D. Band neutrophil\n- A. Monocyte", "D", "ordered_list:label_with_text"),
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
        ("B or C", "unparseable:no_answer"),
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
