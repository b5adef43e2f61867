"""The data files a MetaImage (`.mhd`/`.mha`) or NRRD (`.nhdr`/`.nrrd`) header names, read by the readers' own
rules, so that no spelling of the field makes ITK open a file outside the header's folder.

The rules, as read in the readers' sources (MetaIO `src/metaUtils.cxx` `MET_Read`/`MET_SkipToVal` and
`src/metaImage.cxx` `MetaImage::Read`, Kitware/MetaIO@253d202b; NrrdIO `parseNrrd.c`
`_nrrdReadNrrdParseField`/`_nrrdReadNrrdParse_data_file`, InsightSoftwareConsortium/ITK@05ea21c8):

* MetaImage: a field name runs to the first `=` or `:` (either separates), leading white space skipped and
  trailing blanks trimmed; the value follows any run of `=`, `:` and blanks. MetaIO compares names exactly
  (`ElementDataFile`) and stops reading the header at that field, however many lines (of comments or anything)
  come before it. Its value is `LOCAL` (any case the reader knows), `LIST [n]` (file names on the following
  lines), a printf pattern with `%` and up to three numbers (min, max, step; a file name with spaces before them),
  or one file name, to which the reader also tries `.gz` and `.Z`. A name is relative to the header's folder
  unless it is absolute.
* NRRD: a field is `name: value` (colon and space), the name matched without regard to case (`DATA FILE`,
  `datafile`); the header ends at an empty line. The value is `LIST [n]` (names on the following lines up to an
  empty line), a pattern whose first `%` conversion is `%<digits>d` followed by min, max, step [, n], or one
  file name (spaces included).

Parsing here is a superset of both: names are compared without regard to case, spaces or `_`, either separator
counts for either format, lines end at `\\n` and, read a second time, at `\\r` too, and every value any of these
readings gives is checked. A spelling the reader ignores can only make the check stricter, never let a name
through. A header whose end (the data-file field, or NRRD's empty line) does not come within
`HEADER_SCAN_LIMIT` bytes is refused: the reader would go on reading it, the check would not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from mmbu.build.convert.base import ConversionError
from mmbu.core import budget
from mmbu.core.confinement import OutsideFolder, confined_name

HEADER_SCAN_LIMIT = 16 * 1024**2  # bytes of a header read for its fields; MetaIO reads a header of any length
METAIMAGE_SUFFIX_TRIES = ("", ".gz", ".Z")  # MetaImage::Read opens the first of name, name.gz, name.Z that exists
_NRRD_PATTERN = re.compile(r"(?<!%)(?:%%)*%\d*d")  # NrrdIO: the first unescaped conversion is %<digits>d
_METAIMAGE_CONVERSION = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?([a-zA-Z])")


@dataclass
class HeaderFields:
    """What a header says: its fields as the reader reads them (first value of each, by folded name), the data
    files the reader will open (relative to the header's folder) and every name any reading could open."""

    fields: dict[str, str] = field(default_factory=dict)
    data_files: list[str] = field(default_factory=list)
    candidates: set[str] = field(default_factory=set)
    header_bytes: int | None = None  # MetaImage: where the pixels start after an ElementDataFile LOCAL


def fold(name: str) -> str:
    """A field name as compared here: case, spaces, `_` and `-` ignored (`Data File`, `DATA_FILE`, `datafile`)."""
    return re.sub(r"[\s_-]+", "", name).casefold()


def read_header(path: Path, format_name: str) -> HeaderFields:
    """The fields and data files of a MetaImage (`metaimage`) or NRRD (`nrrd`) header; ConversionError naming the
    header when it cannot be read or its end does not come within HEADER_SCAN_LIMIT."""
    text, limited = _head(path, format_name)
    if format_name == "metaimage":
        return _metaimage(path, text, limited)
    return _nrrd(path, text, limited)


_HEADER_END = {"metaimage": re.compile(r"(?m)^\s*ElementDataFile\s*[=:][^\n]*\n"), "nrrd": re.compile(r"\n\r?\n")}


def _head(path: Path, format_name: str) -> tuple[str, bool]:
    """The header's text, read in growing blocks until its end (a MetaImage LIST: the whole file), and whether
    it was cut at HEADER_SCAN_LIMIT."""
    block = 1 << 16
    try:
        with path.open("rb") as handle:
            data = handle.read(block)
            while len(data) <= HEADER_SCAN_LIMIT:
                match = _HEADER_END[format_name].search(data.decode("latin-1"))
                if match and not (format_name == "metaimage" and "LIST" in match.group(0)):
                    break
                more = handle.read(min(len(data), HEADER_SCAN_LIMIT + 1 - len(data)) or 1)
                if not more:
                    break
                data += more
    except OSError as exc:
        raise ConversionError(f"{path} cannot be read ({exc.strerror or exc})") from None
    return data[: HEADER_SCAN_LIMIT].decode("latin-1"), len(data) > HEADER_SCAN_LIMIT


def check_data_files(path: Path, format_name: str) -> HeaderFields:
    """`read_header`, then every name any reading gives confined to the header's folder (links resolved) and
    every data file the reader will open present; ConversionError naming the header and the name otherwise.
    Done before ITK opens anything, so a hostile header never makes it read elsewhere."""
    header = read_header(path, format_name)
    for name in sorted(header.candidates):
        try:
            confined_name(path.parent, name, what="the data file")
        except OutsideFolder:
            raise ConversionError(f"{path} names the data file {name!r}, which lies outside the header's folder; "
                                  "only files beside the header are read") from None
    for name in header.data_files:
        if not any((path.parent / (name + suffix)).is_file() for suffix in _tries(format_name)):
            raise ConversionError(f"{path} names the data file {name!r}, which does not exist beside it")
    return header


def _tries(format_name: str) -> tuple[str, ...]:
    return METAIMAGE_SUFFIX_TRIES if format_name == "metaimage" else ("",)


def _line_readings(text: str) -> list[list[str]]:
    """The header's lines as `\\n` ends them (a `\\r` before it dropped) and as `\\r` or `\\n` end them."""
    return [[line.removesuffix("\r") for line in text.split("\n")], re.split(r"\r\n|\r|\n", text)]


def _split_field(line: str, separators: str) -> tuple[str, str] | None:
    """(name, value) of a `name<sep>value` line: the name up to the first separator, the value after any run of
    separators and blanks (MET_SkipToVal); None for a line without one."""
    match = re.match(rf"\s*([^{separators}]*)[{separators}]", line)
    if match is None:
        return None
    return match.group(1).strip(), line[match.end():].lstrip(separators + " \t").strip()


# --- MetaImage ------------------------------------------------------------------------------------------------

def _metaimage(path: Path, text: str, limited: bool) -> HeaderFields:
    header = HeaderFields()
    for reading, lines in enumerate(_line_readings(text)):
        for number, line in enumerate(lines):
            parts = _split_field(line, "=:")
            if parts is None:
                continue
            name, value = parts
            if reading == 0:
                header.fields.setdefault(fold(name), value)
            if fold(name) != "elementdatafile":
                continue
            following = lines[number + 1:]
            header.candidates |= _metaimage_names(path, value, following)
            if name == "ElementDataFile":  # the reader stops here: the pixels or the file list follow
                if reading == 0:
                    header.data_files = _metaimage_data_files(path, value, following)
                    header.header_bytes = sum(len(piece) + 1 for piece in text.split("\n")[: number + 1])
                break
        else:
            if reading == 0 and limited:
                raise ConversionError(f"{path} has no ElementDataFile field within its first {HEADER_SCAN_LIMIT:,} "
                                      "bytes; so long a header is refused")
    return header


def _metaimage_names(path: Path, value: str, following: list[str]) -> set[str]:
    """Every name the value could make the reader open (for the confinement check only); the value as MetaIO
    keeps it (499 characters) and whole."""
    names: set[str] = set()
    for text in {value, value[:499].strip()}:
        if not text or text.casefold() == "local":
            continue
        if text.split()[0].casefold().startswith("list"):
            names |= {variant for line in following if line.strip() for variant in (line.rstrip(), line.strip())}
        elif "%" in text:
            names.add(_metaimage_pattern(path, text)[1])
        else:
            names |= {text + suffix for suffix in METAIMAGE_SUFFIX_TRIES}
    return names


def _metaimage_pattern(path: Path, value: str) -> tuple[str, str, list[int]]:
    """(the pattern, the pattern with its integer conversion written as 0, the numbers after it), as
    MetaImage::Read splits the value: with five words or more the last three are the numbers (the name has
    spaces). It formats the pattern with one int, so any other conversion (%s, %c, two) is refused."""
    words = value.split()
    pattern_words, number_words = (words[:-3], words[-3:]) if len(words) >= 5 else (words[:1], words[1:4])
    pattern = " ".join(pattern_words)
    conversions = [m.group(1) for m in _METAIMAGE_CONVERSION.finditer(pattern) if m.group(0) != "%%"]
    if conversions not in (["d"], ["i"], ["u"]):
        raise ConversionError(f"{path} has a data file pattern {value!r} that is not one integer conversion "
                              "(%d, e.g. slice%03d.raw 1 40 1)")
    zeroed = _METAIMAGE_CONVERSION.sub(lambda m: "%" if m.group(0) == "%%" else "0", pattern)
    numbers = [int(float(m.group(0))) if (m := re.match(r"[-+]?\d+(\.\d*)?", word)) else 0 for word in number_words]
    return pattern, zeroed, numbers


def _metaimage_data_files(path: Path, value: str, following: list[str]) -> list[str]:
    """The names the reader opens, as it reads them (LOCAL: none)."""
    if not value or value in ("LOCAL", "Local", "local"):
        return []
    if value.startswith("LIST"):
        return _bounded(path, [line.rstrip() for line in following if line.strip()])
    if "%" in value:
        pattern, _, numbers = _metaimage_pattern(path, value)
        if len(numbers) < 3:
            return []  # the reader takes the range from the image size: ITK reports a missing file itself
        first, last, step = numbers
        return _expanded(path, pattern, first, last, step or 1)
    return [value]


# --- NRRD -----------------------------------------------------------------------------------------------------

def _nrrd(path: Path, text: str, limited: bool) -> HeaderFields:
    header = HeaderFields()
    plain = text.split("\n")
    end = next((i for i, line in enumerate(plain) if i and not line.removesuffix("\r")), None)
    if end is None and limited:
        raise ConversionError(f"{path} has no end of header (an empty line) within its first {HEADER_SCAN_LIMIT:,} "
                              "bytes; so long a header is refused")
    region = "\n".join(plain[: end if end is not None else len(plain)])
    for reading, lines in enumerate(_line_readings(region)):
        for number, line in enumerate(lines):
            if line.startswith("#"):
                continue
            if reading == 0 and ": " in line:  # the reader's own reading of a field
                key, value = line.split(": ", 1)
                header.fields.setdefault(fold(key), value.strip())
            for separators in (":", "="):  # NRRD's is ": "; ":=" and "=" lines are read too, to be strict
                parts = _split_field(line, separators)
                if parts is None or fold(parts[0]) not in ("datafile", "datafiles"):
                    continue
                following = _list_lines(plain, number) if reading == 0 else lines[number + 1:]
                header.candidates |= _nrrd_names(parts[1], following)
                if reading == 0 and ": " in line and not header.data_files:
                    header.data_files = _nrrd_data_files(path, line.split(": ", 1)[1].strip(), following)
    return header


def _list_lines(plain: list[str], number: int) -> list[str]:
    """The lines after a `data file: LIST` line: to the next empty line (past the header's end, which a LIST
    field is followed by)."""
    names = []
    for line in plain[number + 1:]:
        if not line.removesuffix("\r"):
            break
        names.append(line.removesuffix("\r"))
    return names


def _nrrd_names(value: str, following: list[str]) -> set[str]:
    if not value:
        return set()
    if value.casefold().startswith("list"):
        return {line.strip() for line in following if line.strip()} | {value}
    match = _NRRD_PATTERN.search(value.split()[0]) if "%" in value else None
    if match:
        return {_NRRD_PATTERN.sub("0", value.split()[0], count=1)}
    return {value, value.strip()}


def _nrrd_data_files(path: Path, value: str, following: list[str]) -> list[str]:
    if value.startswith("LIST"):
        return _bounded(path, [line for line in following if line])
    words = value.split()
    if words and "%" in words[0] and _NRRD_PATTERN.search(words[0]):
        try:
            first, last, step = (int(word) for word in words[1:4])
        except ValueError:
            raise ConversionError(f"{path} has a data file pattern {value!r} that cannot be expanded") from None
        return _expanded(path, words[0], first, last, step)
    return [value]


# --- shared ---------------------------------------------------------------------------------------------------

def _expanded(path: Path, template: str, first: int, last: int, step: int) -> list[str]:
    if step == 0 or (last - first) * step < 0:
        raise ConversionError(f"{path} has a data file pattern {template!r} {first} {last} {step} that names no file")
    count = (last - first) // step + 1
    _within_budget(path, count, "data files")
    try:
        return [template % number for number in range(first, last + (1 if step > 0 else -1), step)]
    except (TypeError, ValueError):
        raise ConversionError(f"{path} has a data file pattern {template!r} that cannot be expanded") from None


def _bounded(path: Path, names: list[str]) -> list[str]:
    _within_budget(path, len(names), "data files")
    return names


def _within_budget(path: Path, count: int, what: str) -> None:
    """A data file per slice: a pattern or list naming more than the budget's slices is refused before the names
    are made (a 150-byte header's pattern of 10^9 slices held 3.5 GB of names)."""
    try:
        budget.check_slices(path, count, what)
    except budget.OverBudget as exc:
        raise ConversionError(str(exc)) from None
