"""Read model outputs: closed answers as option labels, detection answers as pixel boxes."""
from ._boxes import BOX_KEYS, BoxExtraction, RawBox, extract_boxes, parse_box_string
from ._closed import UNPARSEABLE, ClosedParse, option_labels, parse_closed_answer, resolve_candidate
from ._coords import Box, to_original_pixels
from ._text import normalise_label_text, strip_reasoning

__all__ = [
    "BOX_KEYS",
    "UNPARSEABLE",
    "Box",
    "BoxExtraction",
    "ClosedParse",
    "RawBox",
    "extract_boxes",
    "normalise_label_text",
    "option_labels",
    "parse_box_string",
    "parse_closed_answer",
    "resolve_candidate",
    "strip_reasoning",
    "to_original_pixels",
]
