"""Reading a release directory: tasks, sample tables without image bytes, streamed images."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from mmbu.benchmark_eval import release
from support.eval_release import write_release


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=5, shards=2)


def test_list_tasks_in_canonical_order(release_dir):
    assert release.list_tasks(release_dir) == list(release.TASKS)


def test_load_samples_reads_contract_columns_but_no_image_bytes(release_dir):
    frame = release.load_samples(release_dir, "mask_grounded_classification")
    assert len(frame) == 5
    assert "image" not in frame.columns and "mask" not in frame.columns
    assert frame["has_mask"].all()
    assert list(frame["answer_aliases"].iloc[0]) == [frame["answer"].iloc[0].upper()]
    assert frame["options"].iloc[0][-1] == "None of the above"
    ungrounded = release.load_samples(release_dir, "ungrounded_classification")
    assert not ungrounded["has_mask"].any()


def test_load_samples_with_projection(release_dir):
    frame = release.load_samples(release_dir, "object_detection", columns=["sample_id", "target", "boxes"])
    assert list(frame.columns) == ["sample_id", "target", "boxes"]
    assert len(frame["boxes"].iloc[0][0]) == 4


def test_iter_images_streams_png_and_mask(release_dir):
    frame = release.load_samples(release_dir, "mask_grounded_classification")
    wanted = set(frame["sample_id"].iloc[[1, 4]])
    got = list(release.iter_images(release_dir, "mask_grounded_classification", wanted, batch_rows=2))
    assert {g.sample_id for g in got} == wanted
    for item in got:
        image, mask = Image.open(io.BytesIO(item.image)), Image.open(io.BytesIO(item.mask))
        assert image.size == mask.size == (320, 240)
        assert mask.getextrema() == (0, 255)


def test_load_image_single_lookup(release_dir):
    image, mask = release.load_image(release_dir, "object_detection", "obje-0003")
    assert Image.open(io.BytesIO(image)).format == "PNG"
    assert mask is None
    with pytest.raises(release.ReleaseError, match="no sample with id 'nope'"):
        release.load_image(release_dir, "object_detection", "nope")


def test_missing_column_names_file_and_column(tmp_path):
    write_release(tmp_path, tasks=("ungrounded_classification",), drop_column="question_modality")
    with pytest.raises(release.MissingColumnError) as info:
        release.load_samples(tmp_path, "ungrounded_classification")
    message = str(info.value)
    assert "question_modality" in message and "train-00000-of-00001.parquet" in message


def test_not_a_release_and_unknown_task(tmp_path):
    with pytest.raises(release.ReleaseError, match="no data/ folder"):
        release.list_tasks(tmp_path)
    write_release(tmp_path, tasks=("ungrounded_classification",), count=1)
    with pytest.raises(release.ReleaseError, match="no Parquet files for task 'object_detection'"):
        release.load_samples(tmp_path, "object_detection")
