"""Samples that are not files (array items, assembled masks) go through convert and release like any other:
the released image and mask equal the source pixels, a rebuild is a no-op, a lost cache file is made again."""
from __future__ import annotations

import io

import numpy as np
import yaml
from PIL import Image

from mmbu.build.pipeline import BuildConfig, run_build

TISSUE = {
    "image_source": "synthetic test images", "dataset_name": "synthetic nuclei", "domain": "pathology",
    "modality": "light microscopy", "sub_modality": "brightfield microscopy", "stain": "hematoxylin and eosin",
    "specimen": "human", "topic": "nuclei", "original_task": "nucleus segmentation", "url": "https://example.org/n",
}
TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]


def make_repo(root):
    manifests = root / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    fold = root / "src" / "pannuke" / "Fold 1"
    (fold / "images" / "fold1").mkdir(parents=True)
    (fold / "masks" / "fold1").mkdir(parents=True)
    images = np.random.default_rng(5).integers(0, 256, (2, 40, 48, 3)).astype(np.float64)
    masks = np.zeros((2, 40, 48, 3))
    masks[:, 4:12, 6:16, 0] = 3       # a neoplastic nucleus in each image
    masks[:, 20:30, 25:40, 1] = 9     # an inflammatory cell
    masks[..., 2] = masks[..., :2].sum(-1) == 0
    np.save(fold / "images" / "fold1" / "images.npy", images)
    np.save(fold / "masks" / "fold1" / "masks.npy", masks)
    document = {
        "id": "nuclei_arrays", "title": "nuclei arrays", "license": "CC-BY-4.0", "citation": "test data",
        "curation": {"round": 3, "reviewers": ["tester"]}, "source": {"kind": "local", "path": "src/pannuke"},
        "tasks": TASKS, "metadata": TISSUE,
        "layout": {"kind": "arrays", "images": "Fold {fold}/images/fold{fold}/images.npy",
                   "masks": "Fold {fold}/masks/fold{fold}/masks.npy",
                   "mask_channels": ["neoplastic", "inflammatory", None]},
        "labels": {"neoplastic": "neoplastic cell nucleus", "inflammatory": "inflammatory cell nucleus"},
        "questions": {"options_name": "nucleus type", "target_name": "nucleus", "n_options": 3},
    }
    (manifests / "nuclei_arrays.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return images, masks


def add_parquet_and_polygon_datasets(root):
    """A parquet table of JPEG bytes (classification) and one Aperio XML polygon file (mask rows)."""
    from datasets import Dataset, Features, Image as ImageFeature, Value

    manifests = root / "manifests" / "datasets"
    (root / "src" / "table" / "data").mkdir(parents=True)
    jpegs = []
    for value in (40, 200):
        buffer = io.BytesIO()
        Image.fromarray(np.full((24, 32, 3), value, np.uint8)).save(buffer, format="JPEG", quality=95)
        jpegs.append(buffer.getvalue())
    Dataset.from_dict({"image": jpegs, "dx": ["nv", "bkl"]},
                      features=Features({"image": ImageFeature(), "dx": Value("string")})).to_parquet(
        root / "src" / "table" / "data" / "test-00000-of-00001.parquet")
    base = {"license": "CC-BY-4.0", "citation": "test data", "curation": {"round": 3, "reviewers": ["tester"]},
            "metadata": TISSUE}
    table = {**base, "id": "skin_table", "title": "skin table", "source": {"kind": "local", "path": "src/table"},
             "tasks": ["ungrounded_classification"],
             "layout": {"kind": "parquet", "files": "data/{split}-*.parquet", "label_column": "dx"},
             "labels": {"nv": "melanocytic nevus", "bkl": "keratosis-like lesion"},
             "questions": {"options_name": "lesion type", "n_options": 3}}
    (manifests / "skin_table.yaml").write_text(yaml.safe_dump(table, sort_keys=False), encoding="utf-8")
    folder = root / "src" / "monuseg"
    (folder / "Tissue Images").mkdir(parents=True)
    (folder / "Annotations").mkdir()
    Image.fromarray(np.full((30, 40, 3), 90, np.uint8)).save(folder / "Tissue Images" / "TCGA-18-5592-01Z-00-DX1.tif")
    vertices = "".join(f'<Vertex X="{x}" Y="{y}"/>' for x, y in ((5, 5), (20, 5), (20, 15), (5, 15)))
    (folder / "Annotations" / "TCGA-18-5592-01Z-00-DX1.xml").write_text(
        f'<Annotations><Annotation Id="1"><Regions><Region Id="1"><Vertices>{vertices}</Vertices></Region>'
        "</Regions></Annotation></Annotations>", encoding="utf-8")
    polygons = {**base, "id": "nuclei_polygons", "title": "nuclei polygons", "tasks": ["mask_grounded_classification"],
                "source": {"kind": "local", "path": "src/monuseg"},
                "layout": {"kind": "polygons", "format": "aperio_xml", "images": "Tissue Images/{stem}.tif",
                           "annotations": "Annotations/{stem}.xml", "fixed_label": "nucleus"},
                "labels": {"nucleus": "cell nucleus", "other": "other structure"},
                "questions": {"options_name": "structure", "n_options": 3}}
    (manifests / "nuclei_polygons.yaml").write_text(yaml.safe_dump(polygons, sort_keys=False), encoding="utf-8")
    return jpegs


def test_table_cells_and_drawn_polygons_reach_the_release(tmp_path):
    from datasets import load_dataset

    make_repo(tmp_path)
    jpegs = add_parquet_and_polygon_datasets(tmp_path)
    report = run_build(config(tmp_path))
    assert report.exit_code == 0, report.failed
    release = str(tmp_path / "data" / "release")
    rows = load_dataset(release, "ungrounded_classification", split="test", cache_dir=str(tmp_path / "hf"))
    by_answer = {row["answer"]: np.asarray(row["image"]) for row in rows}
    for data, answer in zip(jpegs, ("melanocytic nevus", "keratosis-like lesion")):
        assert np.array_equal(by_answer[answer], np.asarray(Image.open(io.BytesIO(data))))  # decoded once, kept
    masks = load_dataset(release, "mask_grounded_classification", split="test", cache_dir=str(tmp_path / "hf"))
    drawn = [row for row in masks if row["dataset_id"] == "nuclei_polygons"]
    assert len(drawn) == 1 and drawn[0]["boxes"] == [[5, 5, 21, 16]]
    assert (np.asarray(drawn[0]["mask"]) > 0).sum() == 16 * 11


def config(root):
    return BuildConfig(manifests_dir=root / "manifests" / "datasets", data_dir=root / "data", repo_root=root)


def test_array_items_reach_the_release_with_their_exact_pixels_and_masks(tmp_path):
    from datasets import load_dataset

    images, masks = make_repo(tmp_path)
    report = run_build(config(tmp_path))
    assert report.exit_code == 0, report.failed
    assert report.release_rows == {"box_grounded_classification": 4, "mask_grounded_classification": 4,
                                   "object_detection": 4}
    rows = load_dataset(str(tmp_path / "data" / "release"), "mask_grounded_classification", split="test",
                        cache_dir=str(tmp_path / "hf"))
    released = {np.asarray(row["image"]).tobytes(): row for row in rows}
    for index in range(2):
        pixels = images[index].astype(np.uint8)
        for channel, value in ((0, 3), (1, 9)):
            row = next(r for r in rows if np.array_equal(np.asarray(r["image"]), pixels)
                       and np.array_equal(np.asarray(r["mask"]) > 0, masks[index, ..., channel] == value))
            ys, xs = np.nonzero(masks[index, ..., channel] == value)
            assert row["boxes"] == [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]
    assert len(released) == 2


def test_a_rebuild_is_a_no_op_and_a_lost_cache_file_is_made_again(tmp_path):
    make_repo(tmp_path)
    run_build(config(tmp_path))
    cache = tmp_path / "data" / "work" / "nuclei_arrays" / "layout-cache"
    derived = sorted(cache.glob("*/*.png"))
    assert len(derived) == 4  # two images, two assembled masks
    stamps = {p: p.stat().st_mtime_ns for p in derived}
    assert run_build(config(tmp_path)).datasets[0].ran == []
    derived[0].unlink()
    report = run_build(config(tmp_path))
    assert report.exit_code == 0 and "layout" in report.datasets[0].ran
    assert derived[0].exists()
    assert {p: p.stat().st_mtime_ns for p in derived[1:]} == {p: stamps[p] for p in derived[1:]}


def test_a_panel_and_a_sample_composed_from_channel_files_reach_the_release(tmp_path):
    """DeepLIIF-like panels (image | mask in one PNG) and CELLULAR-like channel files (`_w1`, `_w2` 16-bit TIFFs, one
    colour PNG per cell) through convert and release: the panel's pixels are kept, the channels are blended in the
    manifest's colours, and the mask rows' boxes and masks are the drawn rectangles."""
    import tifffile
    from datasets import load_dataset

    manifests = tmp_path / "manifests" / "datasets"
    manifests.mkdir(parents=True)
    panel = np.stack([np.add.outer(np.arange(16) * 9, np.arange(20) * 4) % 256] * 3, axis=-1).astype(np.uint8)
    mask = np.zeros((16, 20, 3), np.uint8)
    mask[3:9, 4:12] = (255, 0, 0)
    (tmp_path / "src" / "liif").mkdir(parents=True)
    Image.fromarray(np.concatenate([panel, mask], axis=1)).save(tmp_path / "src" / "liif" / "Lung_1.png")
    cells = tmp_path / "src" / "cellular"
    (cells / "images").mkdir(parents=True)
    (cells / "masks" / "A01" / "fed").mkdir(parents=True)
    left = np.zeros((16, 20), np.uint16)
    left[:, :10] = 1000
    tifffile.imwrite(cells / "images" / "A01_w1.TIF", left)
    tifffile.imwrite(cells / "images" / "A01_w2.TIF", ((left == 0) * 3000).astype(np.uint16))
    cell = np.zeros((16, 20, 3), np.uint8)
    cell[2:7, 11:18] = (31, 119, 180)
    Image.fromarray(cell).save(cells / "masks" / "A01" / "fed" / "cell_1.png")
    base = {"license": "CC-BY-4.0", "citation": "test data", "curation": {"round": 3, "reviewers": ["tester"]},
            "metadata": TISSUE, "tasks": TASKS, "questions": {"options_name": "cell type", "n_options": 3}}
    documents = {
        "liif_panels": {**base, "title": "panels", "source": {"kind": "local", "path": "src/liif"},
                        "layout": {"kind": "image_mask_pairs", "images": "*.png",
                                   "panels": {"across": 2, "image": 1, "mask": 2},
                                   "mask_colors": {"#ff0000": "positive"}, "instances": "components"},
                        "labels": {"positive": "positive cell", "negative": "negative cell"}},
        "cellular_channels": {**base, "title": "channels", "source": {"kind": "local", "path": "src/cellular"},
                              "layout": {"kind": "mask_files", "image": "images/{field}_{channel}.TIF",
                                         "channels": {"part": "channel", "colors": {"w1": "#00ff00",
                                                                                    "w2": "#ff0000"}},
                                         "masks": ["masks/{field}/{class}/*.png"], "objects": "file",
                                         "label_part": "class"},
                              "labels": {"fed": "fed cell", "unfed": "unfed cell"}},
    }
    for name, document in documents.items():
        (manifests / f"{name}.yaml").write_text(yaml.safe_dump({"id": name, **document}, sort_keys=False))

    report = run_build(config(tmp_path))

    assert report.exit_code == 0, report.failed
    rows = load_dataset(str(tmp_path / "data" / "release"), "mask_grounded_classification", split="test",
                        cache_dir=str(tmp_path / "hf"))
    by_dataset = {row["dataset_id"]: row for row in rows}
    released = by_dataset["liif_panels"]
    assert np.array_equal(np.asarray(released["image"]), panel)
    assert released["boxes"] == [[4, 3, 12, 9]] and (np.asarray(released["mask"]) > 0).sum() == 6 * 8
    composed = by_dataset["cellular_channels"]
    image = np.asarray(composed["image"])
    assert image.shape == (16, 20, 3)
    assert (image[:, :10] == (0, 255, 0)).all() and (image[:, 10:] == (255, 0, 0)).all()  # w1 green, w2 red
    assert composed["boxes"] == [[11, 2, 18, 7]] and composed["answer"] == "fed cell"
