"""NIfTI slices against independent references: nibabel's full-load canonical path and world coordinates.

Our reader reads one slice straight from disk and reorients only that slice. The oracle here loads
the whole volume the plain way (`nib.as_closest_canonical(img).get_fdata()`), takes the slice, shows
it radiologically with numpy's own rotations (`np.fliplr(np.rot90(...))`, not our indexing) and
windows it with `np.percentile`. Volumes are written with hand-made affines (not the factories'
`as_reoriented`), including qform-only headers, oblique and 4-D data. Markers are placed by their
*world* coordinates (affine × voxel index), so "patient's right is on the image's left" is checked
without trusting any orientation code at all.
"""
from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest

from mmbu.build.convert.base import ConvertOptions
from mmbu.build.convert.dispatch import read_image

SHAPE = (18, 22, 14)


def _rotation_z(degrees: float) -> np.ndarray:
    angle = np.radians(degrees)
    rotation = np.eye(4)
    rotation[:2, :2] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
    return rotation


def _permuted(columns: list[tuple[int, float]], shape=SHAPE) -> np.ndarray:
    """An affine whose voxel axis i points along world axis columns[i][0] with sign/size columns[i][1]."""
    affine = np.zeros((4, 4))
    affine[3, 3] = 1.0
    for voxel_axis, (world_axis, step) in enumerate(columns):
        affine[world_axis, voxel_axis] = step
    # put the volume's centre at the world origin, so world signs say which side of the body a voxel is on
    centre = affine[:3, :3] @ ((np.array(shape) - 1) / 2.0)
    affine[:3, 3] = -centre
    return affine


AFFINES = {
    "RAS": _permuted([(0, 1.0), (1, 1.0), (2, 1.0)]),
    "LPS": _permuted([(0, -1.0), (1, -1.0), (2, 1.0)]),
    "PIR": _permuted([(1, -1.0), (2, -1.0), (0, 1.0)]),
    "LIA": _permuted([(0, -1.0), (2, -1.0), (1, 1.0)]),
    "ASL": _permuted([(1, 1.0), (2, 1.0), (0, -1.0)]),
    "oblique-20deg-LPS": _rotation_z(20) @ _permuted([(0, -1.0), (1, -1.0), (2, 1.0)]),
}


def _scene(affine: np.ndarray, shape=SHAPE, volumes: int | None = None) -> np.ndarray:
    """A ramp body with markers placed by world position: right-anterior 1000, left-posterior 600."""
    ijk = np.indices(shape).reshape(3, -1)
    world = (affine[:3, :3] @ ijk + affine[:3, 3:4]).reshape(3, *shape)
    data = (100.0 + np.arange(np.prod(shape)).reshape(shape) % 97).astype(np.float32)
    half = np.array(shape).min() / 4.0
    right_anterior = (world[0] > half) & (world[1] > half)
    left_posterior = (world[0] < -half) & (world[1] < -half)
    data[right_anterior] = 1000.0
    data[left_posterior] = 600.0
    if volumes:
        data = np.stack([data + 5.0 * t for t in range(volumes)], axis=-1)
    return data


def _write(path, data: np.ndarray, affine: np.ndarray, qform_only: bool = False) -> str:
    image = nib.Nifti1Image(data, affine)
    if qform_only:
        image.header.set_qform(affine, code=1)
        image.header.set_sform(np.eye(4), code=0)  # readers must fall back to the qform
        image = nib.Nifti1Image(data, None, image.header)
    nib.save(image, str(path))
    return str(path)


def _expected(path: str, axis: int, index: int | str, volume: int | None = None) -> np.ndarray:
    """The slice the plain way: whole volume, canonical, numpy rotations, np.percentile window."""
    canonical = nib.as_closest_canonical(nib.load(path))
    data = canonical.get_fdata()
    if data.ndim == 4:
        data = data[..., data.shape[3] // 2 if volume is None else volume]
    position = data.shape[axis] // 2 if index == "middle" else index
    plane = np.take(data, position, axis=axis)  # (first remaining axis, second remaining axis)
    # rot90 puts the second axis upward (anterior/superior up, first axis ascending to the right);
    # fliplr then puts the higher first-axis end (patient's right, or anterior) on the image's left
    shown = np.fliplr(np.rot90(plane))
    usable = shown[np.isfinite(shown) & (shown != 0)]
    lo, hi = np.percentile(usable, [0.5, 99.5])
    return np.clip(np.rint((shown - lo) * 255.0 / (hi - lo)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("name", sorted(AFFINES))
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_slice_matches_the_full_load_canonical_path(tmp_path, name, axis):
    path = _write(tmp_path / f"{name}.nii.gz", _scene(AFFINES[name]), AFFINES[name])
    ours = read_image(path, ConvertOptions(axis=axis)).pixels
    expected = _expected(path, axis, "middle")
    assert ours.shape == expected.shape
    assert np.abs(ours.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("name", sorted(AFFINES))
def test_markers_land_where_a_radiologist_expects_them(tmp_path, name):
    path = _write(tmp_path / f"{name}.nii", _scene(AFFINES[name]), AFFINES[name])
    converted = read_image(path, ConvertOptions(axis=2))
    pixels = converted.pixels
    height, width = pixels.shape
    right_anterior = np.argwhere(pixels == 255)
    left_posterior = np.argwhere((pixels > 100) & (pixels < 200))  # 600 lands mid-grey, away from the body ramp
    # axial, radiological: patient's right on the image's left, anterior at the top
    assert right_anterior.size and left_posterior.size
    assert right_anterior[:, 0].mean() < height / 2 and right_anterior[:, 1].mean() < width / 2, converted.params
    assert left_posterior[:, 0].mean() > height / 2 and left_posterior[:, 1].mean() > width / 2, converted.params


def test_qform_only_header_is_oriented_by_its_qform(tmp_path):
    affine = AFFINES["LPS"]
    path = _write(tmp_path / "qform.nii", _scene(affine), affine, qform_only=True)
    assert nib.load(path).header.get_sform(coded=True)[1] == 0
    converted = read_image(path, ConvertOptions(axis=2))
    assert converted.params["axcodes_before"] == "LPS"
    assert np.abs(converted.pixels.astype(int) - _expected(path, 2, "middle")).max() <= 1


@pytest.mark.parametrize("volume", ["middle", 0, 3])
def test_4d_volume_slice_matches_the_full_load_path(tmp_path, volume):
    affine = AFFINES["PIR"]
    path = _write(tmp_path / "fmri.nii.gz", _scene(affine, volumes=5), affine)
    ours = read_image(path, ConvertOptions(axis=2, frame=volume)).pixels
    expected = _expected(path, 2, "middle", None if volume == "middle" else volume)
    assert np.abs(ours.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("index", [0, 3, 13])
def test_slice_indices_count_in_the_canonical_frame(tmp_path, index):
    affine = AFFINES["LIA"]  # canonical z is the stored middle axis running downwards: indices differ
    path = _write(tmp_path / "lia.nii", _scene(affine), affine)
    ours = read_image(path, ConvertOptions(axis=2, slice=index)).pixels
    assert np.abs(ours.astype(int) - _expected(path, 2, index)).max() <= 1


@pytest.mark.parametrize("name", ["LPS", "PIR", "oblique-20deg-LPS"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_image_and_mask_land_on_the_same_pixels(tmp_path, name, axis):
    affine = AFFINES[name].copy()
    affine[:3, :3] = affine[:3, :3] * np.array([1.0, 1.0, 2.5])  # thick third voxel axis: views get stretched
    scene = _scene(affine)
    image_path = _write(tmp_path / "image.nii.gz", scene, affine)
    mask_path = _write(tmp_path / "mask.nii.gz", (scene == 1000).astype(np.uint8), affine)
    # the slice is chosen by the mask (the way segmentation datasets are converted) for both
    choice = {"axis": axis, "max_size": 40, "slice": "mask_max_area", "slice_mask": mask_path}
    image = read_image(image_path, ConvertOptions(**choice)).pixels
    mask = read_image(mask_path, ConvertOptions(**choice, as_mask=True)).pixels
    assert image.shape == mask.shape
    assert set(np.unique(mask)) <= {0, 1} and mask.any()
    # inside the mask the image is the bright marker; well outside it never is
    assert image[mask == 1].mean() > 230
    assert (image[mask == 0] == 255).mean() < 0.1


@pytest.mark.parametrize("name", ["LPS", "PIR"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_itk_rgb_vector_volume_matches_the_full_load_canonical_path(tmp_path, name, axis):
    # (X, Y, Z, 1, 3) uint8 with a vector intent, as ITK/SimpleITK save colour volumes
    scene = _scene(AFFINES[name])
    rgb = np.stack([scene % 256, (scene * 3) % 256, 255 - scene % 256], axis=-1).astype(np.uint8)
    image = nib.Nifti1Image(rgb[:, :, :, None, :], AFFINES[name])
    image.header.set_intent("vector")
    path = str(tmp_path / f"{name}-rgb.nii.gz")
    nib.save(image, path)
    ours = read_image(path, ConvertOptions(axis=axis)).pixels
    canonical = np.asanyarray(nib.as_closest_canonical(nib.load(path)).dataobj)[:, :, :, 0, :]
    plane = np.take(canonical, canonical.shape[axis] // 2, axis=axis)  # (first, second remaining axis, 3)
    expected = np.stack([np.fliplr(np.rot90(plane[..., c])) for c in range(3)], axis=-1)
    np.testing.assert_array_equal(ours, expected)
