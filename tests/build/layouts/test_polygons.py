"""polygons: Aperio/ImageScope XML, LabelMe JSON and CVAT XML drawn into masks at the image's size."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from PIL import Image, ImageDraw
from pydantic import ValidationError
from support.build_manifests import make_manifest

from mmbu.build.layouts import read_mask, read_samples, region_mask

TASKS = ["mask_grounded_classification", "box_grounded_classification", "object_detection"]
MONUSEG = "MoNuSeg 2018 Training Data"


def aperio_xml(regions):
    """An ImageScope annotation file as MoNuSeg ships it: Annotations/Annotation/Regions/Region/Vertices/Vertex."""
    body = "".join(
        f'<Region Id="{number}" Type="0" Zoom="1" Selected="0"><Attributes/><Vertices>'
        + "".join(f'<Vertex X="{x}" Y="{y}" Z="0"/>' for x, y in points) + "</Vertices></Region>"
        for number, points in enumerate(regions, start=1))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Annotations MicronsPerPixel="0.252100">'
            '<Annotation Id="1" Name="" ReadOnly="0" Type="4" LineColor="65280" Visible="1">'
            '<Attributes><Attribute Name="Description" Id="0" Value=""/></Attributes>'
            f'<Regions><RegionAttributeHeaders/>{body}</Regions><Plots/></Annotation></Annotations>')


def monuseg(raw):
    """MoNuSeg training data: `MoNuSeg 2018 Training Data/Tissue Images/TCGA-18-5592-01Z-00-DX1.tif` with
    `MoNuSeg 2018 Training Data/Annotations/TCGA-18-5592-01Z-00-DX1.xml` (constantinpape/torch-em@
    6f71247c0bde24cb050bb25501ca61517ce08b7f:torch_em/data/datasets/histopathology/monuseg.py and util.py
    generate_labeled_array_from_xml; the folder names as public loaders spell them). 1000x1000 there, 60x80 here."""
    images, annotations = raw / MONUSEG / "Tissue Images", raw / MONUSEG / "Annotations"
    images.mkdir(parents=True)
    annotations.mkdir()
    tifffile.imwrite(images / "TCGA-18-5592-01Z-00-DX1.tif", np.full((60, 80, 3), 180, np.uint8), photometric="rgb")
    triangle = [(10, 10), (30, 10), (10, 30)]
    square = [(40.4, 20), (60, 20), (60, 40), (40.4, 40)]
    overlapping = [(55, 35), (70, 35), (70, 50), (55, 50)]  # drawn later: keeps the shared corner
    (annotations / "TCGA-18-5592-01Z-00-DX1.xml").write_text(
        aperio_xml([triangle, square, overlapping, [(1, 1), (5, 5)], [(200, 200), (220, 200), (220, 220)]]),
        encoding="utf-8")
    return triangle, square, overlapping


MONUSEG_LAYOUT = {"kind": "polygons", "format": "aperio_xml", "images": f"{MONUSEG}/Tissue Images/{{stem}}.tif",
                  "annotations": f"{MONUSEG}/Annotations/{{stem}}.xml", "fixed_label": "nucleus"}


def drawn(points, size=(80, 60)):
    canvas = Image.new("1", size, 0)
    ImageDraw.Draw(canvas).polygon(points, fill=1, outline=1)
    return np.asarray(canvas, dtype=bool)


def test_aperio_regions_become_instance_masks_and_boxes(tmp_path):
    raw = tmp_path / "raw"
    triangle, square, overlapping = monuseg(raw)
    samples, exclusions = read_samples(make_manifest(MONUSEG_LAYOUT, labels={"nucleus": "cell nucleus"}, tasks=TASKS),
                                       raw, tmp_path / "cache")

    sample, = samples
    assert sample.image_size == (80, 60)
    assert [(r.instance, r.box) for r in sample.regions] == [
        ("annotation-1/region-1", (10.0, 10.0, 31.0, 31.0)), ("annotation-1/region-2", (40.0, 20.0, 61.0, 41.0)),
        ("annotation-1/region-3", (55.0, 35.0, 71.0, 51.0))]
    ids = read_mask(sample.mask_path)
    assert np.array_equal(region_mask(ids, sample.regions[0]), drawn(triangle))
    assert np.array_equal(region_mask(ids, sample.regions[1]), drawn(square) & ~drawn(overlapping))
    assert np.array_equal(region_mask(ids, sample.regions[2]), drawn(overlapping))
    assert region_mask(ids, sample.regions[0])[10, 10] and not region_mask(ids, sample.regions[0])[29, 29]
    reasons = {e.item.split("#")[1]: e.reason for e in exclusions}
    assert reasons == {"annotation-1/region-4": "a polygon needs at least three points; this one has 2",
                       "annotation-1/region-5": "the polygon covers no pixel of the image (it lies outside it)"}
    assert "ImageDraw.polygon" in sample.provenance["masks"]


def test_labelme_json_polygons_rectangles_and_groups(tmp_path):
    """LabelMe's own example tree (wkentaro/labelme@51e50e43067e4963627513f8334d91f15b11ac48:
    examples/instance_segmentation/data_annotated/2011_000003.json beside 2011_000003.jpg): `imagePath`,
    `imageHeight`, `imageWidth`, `shapes[]` with `label`, `points`, `group_id`, `shape_type`."""
    folder = tmp_path / "raw" / "data_annotated"
    folder.mkdir(parents=True)
    Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(folder / "2011_000003.jpg")
    shapes = [
        {"label": "cell", "points": [[2, 2], [12, 2], [12, 12]], "group_id": None, "shape_type": "polygon", "flags": {}},
        {"label": "cell", "points": [[20, 20], [30, 30]], "group_id": None, "shape_type": "rectangle", "flags": {}},
        {"label": "gland", "points": [[35, 5], [45, 5], [45, 10], [35, 10]], "group_id": 7, "shape_type": "polygon", "flags": {}},
        {"label": "gland", "points": [[35, 30], [45, 30], [45, 35], [35, 35]], "group_id": 7, "shape_type": "polygon", "flags": {}},
        {"label": "cell", "points": [[5, 30], [9, 34]], "group_id": None, "shape_type": "line", "flags": {}},
    ]
    (folder / "2011_000003.json").write_text(json.dumps({
        "version": "4.0.0", "flags": {}, "shapes": shapes, "imagePath": "2011_000003.jpg", "imageData": None,
        "imageHeight": 40, "imageWidth": 50}), encoding="utf-8")
    layout = {"kind": "polygons", "format": "labelme_json", "annotations": "data_annotated/*.json"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"cell": "cell", "gland": "gland"}, tasks=TASKS),
                                       tmp_path / "raw", tmp_path / "cache")

    sample, = samples
    assert sample.source_path == "data_annotated/2011_000003.jpg"
    assert [(r.label, r.instance, r.box) for r in sample.regions] == [
        ("cell", "shape-1", (2.0, 2.0, 13.0, 13.0)), ("cell", "shape-2", (20.0, 20.0, 31.0, 31.0)),
        ("gland", "group-7", (35.0, 5.0, 46.0, 36.0))]  # the two parts of group 7 are one object
    assert region_mask(read_mask(sample.mask_path), sample.regions[2]).sum() == 2 * 11 * 6
    assert [e.reason for e in exclusions] == ["shape_type 'line' is not an area (polygon or rectangle)"]


def test_labelme_json_beside_an_image_folder_finds_images_by_name(tmp_path):
    """JSON files kept apart from their images (json/ beside images/): image_root finds each image by the file
    name of imagePath, here written with Windows separators as LabelMe on Windows saves it."""
    raw = tmp_path / "raw" / "SegmentationDataSet"
    (raw / "json").mkdir(parents=True)
    (raw / "images").mkdir()
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(raw / "images" / "000001_0_1.jpg")
    for stem, image_path in [("000001_0_1", "..\\images\\000001_0_1.jpg"), ("000002_0_1", "000002_0_1.jpg")]:
        (raw / "json" / f"{stem}.json").write_text(json.dumps({
            "shapes": [{"label": "G+", "points": [[5, 5], [15, 5], [15, 12]], "shape_type": "polygon"}],
            "imagePath": image_path, "imageHeight": 30, "imageWidth": 40}), encoding="utf-8")
    layout = {"kind": "polygons", "format": "labelme_json", "annotations": "SegmentationDataSet/json/*.json",
              "image_root": "SegmentationDataSet/images"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"G+": "Gram-positive bacterium"}, tasks=TASKS),
                                       tmp_path / "raw", tmp_path / "cache")

    sample, = samples
    assert sample.source_path == "SegmentationDataSet/images/000001_0_1.jpg"
    assert [(r.label, r.box) for r in sample.regions] == [("G+", (5.0, 5.0, 16.0, 13.0))]
    assert region_mask(read_mask(sample.mask_path), sample.regions[0]).sum() == drawn(
        [(5, 5), (15, 5), (15, 12)], (40, 30)).sum()
    assert len(exclusions) == 1 and "000002_0_1" in exclusions[0].item  # its image is not in the folder


def test_cvat_xml_polygons_and_boxes_for_many_images(tmp_path):
    """CVAT for images 1.1 export: `images/` and one `annotations.xml` (docs.cvat.ai/docs/other/xml_format,
    docs.cvat.ai/v2.1.0/docs/manual/advanced/formats/format-cvat)."""
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    Image.fromarray(np.zeros((30, 40), np.uint8)).save(raw / "images" / "img1.png")
    Image.fromarray(np.zeros((30, 40), np.uint8)).save(raw / "images" / "img2.jpg")
    (raw / "annotations.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<annotations><version>1.1</version><meta><task><name>t</name></task></meta>'
        '<image id="0" name="img1.png" width="40" height="30">'
        '<polygon label="polyp" source="manual" occluded="0" points="5.0,5.0;15.0,5.0;15.0,15.0;5.0,15.0" z_order="0"/>'
        '<box label="polyp" source="manual" occluded="0" xtl="20.0" ytl="10.0" xbr="30.0" ybr="20.0" z_order="0"/>'
        '<polyline label="polyp" points="1,1;2,2" z_order="0"/></image>'
        '<image id="1" name="img2.jpg" width="64" height="48"><box label="polyp" xtl="1" ytl="1" xbr="5" ybr="5"/></image>'
        '</annotations>', encoding="utf-8")
    layout = {"kind": "polygons", "format": "cvat_xml", "annotations": "annotations.xml", "image_root": "images"}
    samples, exclusions = read_samples(make_manifest(layout, labels={"polyp": "polyp"}, tasks=TASKS), raw,
                                       tmp_path / "cache")
    assert [(s.source_path, [r.box for r in s.regions]) for s in samples] == [
        ("images/img1.png", [(5.0, 5.0, 16.0, 16.0), (20.0, 10.0, 31.0, 21.0)])]
    assert {e.reason for e in exclusions} == {"a CVAT polyline is not an area (polygon or box)",
                                             "the annotation is for a 64x48 image but the image is 40x30"}


@pytest.mark.parametrize("layout, message", [
    ({"format": "aperio_xml", "annotations": "a/{stem}.xml"}, "give images"),
    ({"format": "aperio_xml", "annotations": "a/{stem}.xml", "images": "i/{name}.tif"}, "shares no named part"),
    ({"format": "labelme_json", "annotations": "*.json", "images": "x/{a}.png"}, "images is for aperio_xml"),
])
def test_polygon_fields_are_checked(layout, message):
    with pytest.raises(ValidationError, match=message):
        make_manifest({"kind": "polygons", **layout}, labels={"x": "x"}, tasks=TASKS)
