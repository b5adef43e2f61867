"""The composition's selection step on samples made in memory (synthetic ids and paths; no image is read): quotas
shared over labels by water-filling, the test split first, one object per image per round, volume placeholders,
and a choice that depends on the seed and the ids only, never on the order the layout listed the samples in."""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from support.build_manifests import make_manifest

from mmbu.build.json_lines import LinesWriter, read_lines
from mmbu.build.layouts import Region, Sample
from mmbu.build.questions.items import task_items
from mmbu.build.selection import RowFilter, in_test_split, select_samples, water_fill
from mmbu.curation.composition import DatasetRule

LABELS = {"a": "alpha cell", "b": "beta cell", "c": "gamma cell"}
GROUNDED = ["box_grounded_classification", "mask_grounded_classification", "object_detection"]


def rule(caps: dict[str, int | None], *, seed: int = 0, per_label: int = 0, per_image: int = 1) -> DatasetRule:
    every = {task: None for task in ("ungrounded_classification", *GROUNDED)}
    return DatasetRule(profile="test", version=1, seed=seed, caps={**every, **caps}, min_rows_per_label=per_label,
                       objects_per_image=per_image, test_splits=("test",))


def image(path: str, label: str | None = None, regions: tuple[Region, ...] = ()) -> Sample:
    return Sample(sample_id=f"ds-{path.replace('/', '_')}", dataset_id="ds",
                  source_path=path, image_path=Path("/nonexistent") / path, label=label, regions=regions)


def objects(count: int, label: str = "a", boxed: bool = True) -> tuple[Region, ...]:
    return tuple(Region(label=label, instance=str(k), box=(k, 0, k + 2, 2) if boxed else None, mask_value=1 + k)
                 for k in range(count))


def run(tmp_path: Path, samples: list[Sample], manifest, chosen_rule: DatasetRule):
    samples_path = tmp_path / "samples.jsonl"
    with LinesWriter(samples_path) as out:
        for sample in samples:
            out.write(sample.model_dump_json())
    selection = select_samples(samples_path, manifest, chosen_rule, tmp_path / "selected.jsonl",
                               tmp_path / "selection.json")
    kept = [Sample.model_validate_json(line) for line in read_lines(tmp_path / "selected.jsonl")]
    return selection, kept


def classification(tasks=("ungrounded_classification",)):
    return make_manifest({"kind": "folder_per_class"}, dataset_id="ds", labels=LABELS, tasks=list(tasks))


def test_water_filling_keeps_rare_labels_whole_and_shares_the_rest_evenly():
    shares = water_fill({"a": 100, "b": 3, "c": 10}, 20, seed=0)
    assert shares["b"] == 3 and sum(shares.values()) == 20
    assert {shares["a"], shares["c"]} <= {8, 9}  # the remainder row goes to one of them, by the seed's hash
    assert water_fill({"a": 5, "b": 2}, 50, seed=0) == {"a": 5, "b": 2}
    assert sum(water_fill({str(k): 1 for k in range(30)}, 7, seed=3).values()) == 7


def test_a_rare_label_is_kept_whole_under_a_quota_that_drowns_it_in_a_random_draw(tmp_path):
    samples = [image(f"a/{k}.png", "a") for k in range(400)] + [image(f"b/{k}.png", "b") for k in range(3)]
    samples += [image(f"c/{k}.png", "c") for k in range(40)]
    selection, kept = run(tmp_path, samples, classification(), rule({"ungrounded_classification": 30}))
    chosen = Counter(sample.label for sample in kept)
    assert chosen == {"b": 3, "a": 14, "c": 13} or chosen == {"b": 3, "a": 13, "c": 14}
    assert selection.summary["ungrounded_classification"].labels["b"] == [3, 3]
    assert sorted(selection.rows["ungrounded_classification"]) == sorted(s.sample_id for s in kept)


def test_min_rows_per_label_raises_the_quota_so_that_every_label_is_kept(tmp_path):
    labels = {str(k): f"cell kind {k}" for k in range(12)}
    manifest = make_manifest({"kind": "folder_per_class"}, dataset_id="ds", labels=labels)
    samples = [image(f"{k}/{n}.png", str(k)) for k in range(12) for n in range(10)]
    _, kept = run(tmp_path, samples, manifest, rule({"ungrounded_classification": 6}, per_label=2))
    assert Counter(s.label for s in kept) == {str(k): 2 for k in range(12)}  # 24 rows, not 6


def test_the_dataset_s_own_test_split_comes_first(tmp_path):
    samples = [image(f"train/a/{k}.png", "a") for k in range(50)] + [image(f"test/a/{k}.png", "a") for k in range(8)]
    samples += [image(f"train/b/{k}.png", "b") for k in range(50)] + [image(f"test/b/{k}.png", "b") for k in range(2)]
    selection, kept = run(tmp_path, samples, classification(), rule({"ungrounded_classification": 10}))
    by_label = {label: sorted(s.source_path.split("/")[0] for s in kept if s.label == label) for label in "ab"}
    assert by_label["a"] == ["test"] * 5  # five test images of a: no training image needed
    assert by_label["b"] == ["test", "test", "train", "train", "train"]  # both test images, then training ones
    assert selection.summary["ungrounded_classification"].test_split == 7


@pytest.mark.parametrize("path, part, expected", [
    ("CellData/OCT/test/CNV/x.jpeg", None, True), ("pathmnist_224.npz", "key=test_images;index=3", True),
    ("ISIC2018_Task3_Test_Input/ISIC_1.jpg", None, True), ("data/test-00000-of-00001.parquet", "row=2", True),
    ("contest/latest/x.png", None, False), ("train/a/1.png", None, False), ("val_images/1.png", None, False)])
def test_a_test_split_is_a_word_of_the_path_or_part(path, part, expected):
    sample = Sample(sample_id="ds-1", dataset_id="ds", source_path=path, image_path=Path(path), part=part)
    assert in_test_split(sample, ("test",)) is expected


def test_the_choice_depends_on_the_seed_and_ids_not_on_the_listing_order(tmp_path):
    samples = [image(f"{label}/{k}.png", label) for label in "abc" for k in range(60)]
    shuffled = samples[:]
    random.Random(4).shuffle(shuffled)
    for name in ("one", "two", "seed"):
        (tmp_path / name).mkdir()
    first, _ = run(tmp_path / "one", samples, classification(), rule({"ungrounded_classification": 20}))
    second, _ = run(tmp_path / "two", shuffled, classification(), rule({"ungrounded_classification": 20}))
    other, _ = run(tmp_path / "seed", samples, classification(), rule({"ungrounded_classification": 20}, seed=1))
    assert first.rows == second.rows
    assert (tmp_path / "one" / "selection.json").read_bytes() == (tmp_path / "two" / "selection.json").read_bytes()
    assert other.rows != first.rows and len(other.rows["ungrounded_classification"]) == 20


def test_objects_come_one_per_image_per_round_and_images_without_a_chosen_row_are_not_converted(tmp_path):
    manifest = make_manifest({"kind": "folder_per_class"}, dataset_id="ds", labels=LABELS, tasks=GROUNDED)
    samples = [image(f"field{k}.png", regions=objects(30)) for k in range(8)]
    caps = {"box_grounded_classification": 12, "mask_grounded_classification": 3, "object_detection": 2}
    selection, kept = run(tmp_path, samples, manifest, rule(caps))
    chosen = set(selection.rows["box_grounded_classification"])
    boxes = [item.sample.sample_id for item in task_items(samples, manifest) if item.sample_id in chosen]
    assert sorted(Counter(boxes).values()) == [1, 1, 1, 1, 2, 2, 2, 2]  # all 8 images, then 4
    assert len(selection.rows["mask_grounded_classification"]) == 3 and len(selection.rows["object_detection"]) == 2
    assert {s.sample_id for s in kept} == set(boxes)  # the other tasks' images are among these
    assert len(kept) == 8
    (tmp_path / "few").mkdir()
    few, _ = run(tmp_path / "few", samples[:2], manifest, rule({"box_grounded_classification": 12}))
    assert few.summary["box_grounded_classification"].chosen == 12  # two images: six objects each fill the quota


def test_a_volume_counts_one_row_per_label_until_sliced_and_keeps_one_object_of_each_chosen_label(tmp_path):
    manifest = make_manifest({"kind": "folder_per_class"}, dataset_id="ds", labels=LABELS, tasks=GROUNDED)
    volumes = [image(f"vol{k}.nii.gz", regions=objects(1, "a", boxed=False) + objects(1, "b", boxed=False))
               for k in range(6)]
    selection, kept = run(tmp_path, volumes, manifest, rule({"box_grounded_classification": 4}))
    placeholders = selection.deferred["box_grounded_classification"]
    assert len(placeholders) == 4 and Counter(label for _, label in placeholders) == {"a": 2, "b": 2}
    assert "box_grounded_classification" not in selection.rows  # no row id is known before the slice
    # after conversion, the slice of each kept volume holds several objects per label
    sliced = [v.model_copy(update={"regions": objects(3, "a") + tuple(
        Region(label="b", instance=f"b{k}", box=(k, 5, k + 2, 7), mask_value=9) for k in range(3))}) for v in kept]
    items = task_items(sliced, manifest)
    kept_rows = RowFilter(selection, seed=0)(items)
    boxes = [i for i in kept_rows if i.task == "box_grounded_classification"]
    assert sorted((i.sample.sample_id, i.label) for i in boxes) == sorted(map(tuple, placeholders))
    assert len([i for i in kept_rows if i.task == "mask_grounded_classification"]) == 3 * len(sliced) * 2  # uncapped
    assert RowFilter(selection, seed=0)(items) == kept_rows  # the same object every time
    assert RowFilter(selection, seed=0)([]) == []
