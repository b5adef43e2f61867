"""MetaImage and NRRD fixtures written by SimpleITK (the ITK writers the challenges use).

Arrays are given in ITK's index order (x, y, z[, t]) so tests can speak of axes the way headers do;
`direction` is the 3x3 matrix of direction cosines (columns = where each index axis points in LPS).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import SimpleITK as sitk

IDENTITY = np.eye(3)


def rotation_z(degrees: float) -> np.ndarray:
    """Direction cosines of axes rotated about the superior axis (an oblique acquisition)."""
    t = math.radians(degrees)
    return np.array([[math.cos(t), -math.sin(t), 0.0], [math.sin(t), math.cos(t), 0.0], [0.0, 0.0, 1.0]])


def permuted(order: tuple[int, int, int], signs: tuple[int, int, int]) -> np.ndarray:
    """Direction cosines where index axis j points along LPS axis order[j] with sign signs[j]."""
    direction = np.zeros((3, 3))
    for column, (row, sign) in enumerate(zip(order, signs)):
        direction[row, column] = sign
    return direction


def to_image(array_xyz: np.ndarray, spacing=(1.0, 1.0, 1.0), direction=IDENTITY, origin=(0.0, 0.0, 0.0),
             vector: bool = False) -> sitk.Image:
    """An ITK image from an (x, y, z[, t]) array (or (x, y[, z], components) with `vector`)."""
    spatial = array_xyz.ndim - (1 if vector else 0)
    order = tuple(reversed(range(spatial))) + ((spatial,) if vector else ())
    image = sitk.GetImageFromArray(np.ascontiguousarray(array_xyz.transpose(order)), isVector=vector)
    dims = image.GetDimension()
    full = np.eye(dims)
    full[: min(dims, 3), : min(dims, 3)] = np.asarray(direction)[: min(dims, 3), : min(dims, 3)]
    image.SetDirection(tuple(full.ravel()))
    image.SetSpacing(tuple((list(spacing) + [1.0] * dims)[:dims]))
    image.SetOrigin(tuple((list(origin) + [0.0] * dims)[:dims]))
    return image


def write(path: Path, array_xyz: np.ndarray, compress: bool = False, **geometry) -> Path:
    """Write with SimpleITK; the suffix picks the writer (.mha, .mhd + .raw/.zraw, .nrrd, .nhdr + .raw)."""
    sitk.WriteImage(to_image(array_xyz, **geometry), str(path), useCompression=compress)
    return path


def oracle_view(path: Path, canonical_axis: int, index: int) -> np.ndarray:
    """The slice SimpleITK's own path gives: DICOMOrient to RAS, then the radiological view.

    `DICOMOrient(image, "RAS")` reorders and flips the index axes so they increase toward the
    patient's right, anterior and superior; from that array the canonical slice is taken and shown
    with rows from superior/anterior to inferior/posterior and the patient's right on the left.
    """
    image = sitk.DICOMOrient(sitk.ReadImage(str(path)), "RAS")
    array = sitk.GetArrayFromImage(image)  # (z, y, x)
    canonical = array.transpose(2, 1, 0)
    plane = np.take(canonical, index, axis=canonical_axis)
    return plane.T[::-1, ::-1]
