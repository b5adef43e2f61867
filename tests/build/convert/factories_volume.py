"""NIfTI fixtures written by nibabel: a canonical (RAS+) phantom stored in any axis orientation.

The phantom is defined in the canonical frame, where positions have plain anatomical meaning
(x grows toward the patient's right, y anterior, z superior). `write_nifti` stores it on disk
with the axes permuted and flipped as `axcodes` asks (nibabel's `as_reoriented`, so the affine is
consistent), which is exactly what a converter must undo.
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from nibabel.orientations import axcodes2ornt, ornt_transform

SHAPE = (20, 24, 16)  # canonical x (R), y (A), z (S); all different so a wrong transpose shows
ISOTROPIC_MM = (1.0, 1.0, 1.0)
ANISOTROPIC_MM = (1.0, 1.5, 2.5)  # x, y, z voxel sizes: thick slices


def phantom(shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """Float32 canonical volume: a dim body (value 100..199 ramp), zero air outside, one bright marker.

    The marker (value 1000) sits in the patient's right-anterior-superior octant, so each
    radiological view must put it in its top-left corner.
    """
    x, y, z = shape
    volume = np.zeros(shape, np.float32)
    ramp = np.linspace(100, 199, x * y * z, dtype=np.float32).reshape(shape)
    volume[2:-2, 2:-2, 2:-2] = ramp[2:-2, 2:-2, 2:-2]
    volume[x - 6 : x - 3, y - 6 : y - 3, z - 6 : z - 3] = 1000.0
    return volume


def labels(shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """uint8 canonical label volume whose every voxel is distinct per (x, y) and slice-dependent.

    Values 1..250 vary with x, y and z so any flip, transpose or wrong slice changes the picture.
    """
    x, y, z = np.indices(shape)
    return (1 + (x * 7 + y * 3 + z * 11) % 250).astype(np.uint8)


def write_nifti(
    path: Path,
    canonical: np.ndarray,
    axcodes: str = "RAS",
    version: int = 1,
    zooms: tuple[float, float, float] = ISOTROPIC_MM,
) -> Path:
    """Store a canonical RAS+ array (3-D, or 4-D with time last) in the orientation `axcodes`."""
    image_class = nib.Nifti2Image if version == 2 else nib.Nifti1Image
    affine = np.diag([*zooms, 1.0])
    affine[:3, 3] = [-10.0, 20.0, -30.0]
    ras = image_class(canonical, affine)
    transform = ornt_transform(axcodes2ornt("RAS"), axcodes2ornt(tuple(axcodes)))
    oriented = ras.as_reoriented(transform)
    out = image_class(np.asarray(oriented.dataobj), oriented.affine)
    assert "".join(nib.aff2axcodes(out.affine)) == axcodes
    nib.save(out, str(path))
    return Path(path)


def mask_of_marker(volume: np.ndarray) -> np.ndarray:
    """Label 1 where the phantom's bright marker is, else 0."""
    return (volume >= 1000).astype(np.uint8)
