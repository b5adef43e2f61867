"""Read model outputs: closed answers as option labels, detection answers as pixel boxes."""
from ._boxes import BOX_KEYS, BoxExtraction, RawBox, extract_boxes, parse_box_string
from ._closed import UNPARSEABLE, ClosedParse, option_labels, parse_closed_answer, resolve_candidate
from ._coords import Box, BoxFormat, SmartResize, model_frame, smart_resize, to_original_pixels
from ._text import normalise_label_text, strip_reasoning

__all__ = [
    "BOX_KEYS",
    "UNPARSEABLE",
    "Box",
    "BoxExtraction",
    "BoxFormat",
    "ClosedParse",
    "RawBox",
    "SmartResize",
    "extract_boxes",
    "model_frame",
    "normalise_label_text",
    "option_labels",
    "parse_box_string",
    "parse_closed_answer",
    "resolve_candidate",
    "smart_resize",
    "strip_reasoning",
    "to_original_pixels",
]
