"""Path templates with named parts (the pairing and folder-level language of the layouts)."""
from __future__ import annotations

import pytest

from mmbu.curation.manifest.templates import PathTemplate, TemplateError


def test_parts_match_inside_one_segment_and_repeat_consistently():
    template = PathTemplate("Fold {fold}/images/fold{fold}/images.npy")  # PanNuke's tree
    assert template.names == ("fold",)
    assert template.match("Fold 2/images/fold2/images.npy") == {"fold": "2"}
    assert template.match("Fold 2/images/fold3/images.npy") is None
    assert template.glob == "Fold */images/fold*/images.npy"
    assert template.fill({"fold": "3"}) == "Fold 3/images/fold3/images.npy"


def test_digit_parts_and_globs():
    mask = PathTemplate("{label}/{stem}_mask_{n:d}.png")  # BUSI's further lesions
    assert mask.match("benign/benign (4)_mask_1.png") == {"label": "benign", "stem": "benign (4)", "n": "1"}
    assert mask.match("benign/benign (4)_mask.png") is None
    assert PathTemplate("**/{stem}.tif").match("a/b/c.tif") == {"stem": "c"}
    assert PathTemplate("*/{label}").match("x/y/z") is None


def test_scan_lists_matching_files_and_skips_archive_litter(tmp_path):
    for name in ("data/case_00000/imaging.nii.gz", "data/case_00001/imaging.nii.gz",
                 "__MACOSX/data/case_00000/imaging.nii.gz", "data/.case_x/imaging.nii.gz"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    found = [(p.relative_to(tmp_path).as_posix(), parts) for p, parts in
             PathTemplate("{top}/case_{id}/imaging.nii.gz").scan(tmp_path)]
    assert found == [("data/case_00000/imaging.nii.gz", {"top": "data", "id": "00000"}),
                     ("data/case_00001/imaging.nii.gz", {"top": "data", "id": "00001"})]


@pytest.mark.parametrize("text", ["{a", "a}", "{}", "{a-b}", "/abs/{a}", "../{a}"])
def test_bad_templates_say_why(text):
    with pytest.raises(TemplateError):
        PathTemplate(text)
