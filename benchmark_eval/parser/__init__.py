"""Read model outputs: closed answers as option labels, detection answers as pixel boxes."""
from mmbu.benchmark_eval.parser._boxes import BOX_KEYS, BoxExtraction, RawBox, extract_boxes, parse_box_string
from mmbu.benchmark_eval.parser._closed import UNPARSEABLE, ClosedParse, parse_closed_answer
from mmbu.benchmark_eval.parser._coords import Box, to_original_pixels
from mmbu.benchmark_eval.parser._labels import option_labels, resolve_candidate
from mmbu.benchmark_eval.parser._text import (DEFAULT_REASONING, THINK, ReasoningMarkers, normalise_label_text,
                                              plain_markup, strip_reasoning)

__all__ = [
    "BOX_KEYS",
    "DEFAULT_REASONING",
    "UNPARSEABLE",
    "Box",
    "BoxExtraction",
    "ClosedParse",
    "RawBox",
    "ReasoningMarkers",
    "THINK",
    "extract_boxes",
    "normalise_label_text",
    "option_labels",
    "parse_box_string",
    "parse_closed_answer",
    "plain_markup",
    "resolve_candidate",
    "strip_reasoning",
    "to_original_pixels",
]
