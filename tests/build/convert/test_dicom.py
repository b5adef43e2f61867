"""DICOM display chain: known stored values must come out as known grey levels and colours."""
import io
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms
from pydicom.data import get_testdata_file
from pydicom.encaps import encapsulate
from pydicom.uid import (
    DeflatedExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000,
    JPEG2000Lossless,
    JPEGLosslessSV1,
    JPEGLSLossless,
    RLELossless,
    UID,
)

sys.path.insert(0, str(Path(__file__).parent))
import factories_dicom as fd  # noqa: E402
import factories_raster as fr  # noqa: E402

from mmbu.build.convert.base import ConversionError, ConvertOptions  # noqa: E402
from mmbu.build.convert.dispatch import read_image  # noqa: E402

# stored values -> HU with intercept -1024: -1024, -160, 40, 239, 3071
CT_STORED = np.array([[0, 864, 1064, 1263, 4095]], np.uint16).repeat(4, axis=0)


def test_ct_window_from_file_maps_known_hu_to_known_grey(tmp_path):
    path = fd.write_ct(tmp_path / "ct.dcm", CT_STORED, window=(40, 400))
    converted = read_image(path)
    # DICOM LINEAR 40/400: <= -160 HU black, 40 HU mid-grey, >= 239 HU white
    assert converted.pixels[0].tolist() == [0, 0, 128, 255, 255]
    assert converted.mode == "L" and converted.format == "dicom" and converted.frame is None
    window = converted.params["window"]
    assert window["source"] == "file window" and window["center"] == 40 and window["width"] == 400
    assert converted.params["rescale"] == {"slope": 1.0, "intercept": -1024.0}
    assert converted.params["inverted"] is False
    assert converted.params["decoder"] == "pydicom (native)"
    assert converted.params["transfer_syntax_uid"] == ExplicitVRLittleEndian


def test_modality_lut_applied_before_window(tmp_path):
    # without the intercept, stored 1064 would be far above a 40/400 window and come out white
    path = fd.write_ct(tmp_path / "ct.dcm", CT_STORED, window=(40, 400), intercept=-1024)
    assert read_image(path).pixels[0, 2] == 128
    shifted = fd.write_ct(tmp_path / "ct0.dcm", CT_STORED, window=(1064, 400), intercept=0)
    assert read_image(shifted).pixels[0, 2] == 128


def test_user_window_overrides_the_file(tmp_path):
    path = fd.write_ct(tmp_path / "ct.dcm", CT_STORED, window=(40, 400))
    converted = read_image(path, ConvertOptions(window=(-600, 1500)))
    # lung window -600/1500 spans -1350..149 HU: (HU + 1350) / 1499 * 255
    assert converted.pixels[0].tolist() == [55, 202, 236, 255, 255]
    assert converted.params["window"] == {"center": -600, "width": 1500, "source": "user"}


def test_multiple_file_windows_are_chosen_by_index(tmp_path):
    path = fd.write_ct(tmp_path / "ct.dcm", CT_STORED, window=[(40, 400), (1000, 4000)])
    first = read_image(path)
    second = read_image(path, ConvertOptions(window_index=1))
    assert first.params["window"]["count"] == 2
    assert second.params["window"]["center"] == 1000 and second.params["window"]["index"] == 1
    assert first.pixels[0, 1] == 0 and 0 < second.pixels[0, 1] < 128
    with pytest.raises(ConversionError, match="window index 2 was requested .* has 2 window"):
        read_image(path, ConvertOptions(window_index=2))


def test_without_a_window_the_percentile_window_spans_the_frame(tmp_path):
    path = fd.write_ct(tmp_path / "ct.dcm", fd.ct_ramp(), window=None)
    converted = read_image(path)
    row = converted.pixels[0].astype(int)
    assert row[0] == 0 and row[-1] == 255 and np.all(np.diff(row) >= 0)
    assert converted.params["window"]["source"] == "percentile 0.5-99.5"
    # the bounds are in modality units (HU), not stored values
    assert converted.params["window"]["lo"] < -900


def test_monochrome1_is_inverted_after_windowing(tmp_path):
    stored = np.full((32, 32), 100, np.uint16)
    stored[8:24, 8:24] = 4000  # bright in stored values (dense in a CR): must be dark on screen
    converted = read_image(fd.write_monochrome1(tmp_path / "cr.dcm", stored))
    assert converted.pixels[16, 16] == 0 and converted.pixels[0, 0] == 255
    assert converted.params["inverted"] is True and converted.params["inverted_because"] == "MONOCHROME1"
    # with a window: stored 2048 in a 2048/4096 window is mid-grey, inverted to 255 - 128
    stored[0, 0] = 2048
    windowed = read_image(fd.write_monochrome1(tmp_path / "cr2.dcm", stored, window=(2048, 4096)))
    assert windowed.pixels[0, 0] == 255 - 128
    assert windowed.pixels[16, 16] < 10


def test_monochrome1_with_inverse_shape_is_inverted_once_not_twice(tmp_path):
    stored = np.full((16, 16), 100, np.uint16)
    stored[4:12, 4:12] = 4000
    plain = read_image(fd.write_monochrome1(tmp_path / "a.dcm", stored))
    with_shape = read_image(fd.write_monochrome1(tmp_path / "b.dcm", stored, presentation_shape="INVERSE"))
    assert np.array_equal(plain.pixels, with_shape.pixels)
    assert with_shape.pixels[8, 8] == 0


def test_monochrome2_with_inverse_presentation_shape_is_inverted(tmp_path):
    ds = fd.ct_dataset(CT_STORED, window=(40, 400))
    ds.PresentationLUTShape = "INVERSE"
    converted = read_image(fd.save(ds, tmp_path / "inv.dcm"))
    assert converted.pixels[0].tolist() == [255, 255, 127, 0, 0]
    assert converted.params["inverted_because"] == "PresentationLUTShape INVERSE"


def test_negative_rescale_slope_flips_polarity_once(tmp_path):
    # slope -1: high stored values are low modality values, so they must be dark (and not re-flipped)
    stored = np.array([[0, 1000, 2000, 3000, 4000]], np.uint16).repeat(3, axis=0)
    no_window = read_image(fd.write_ct(tmp_path / "neg.dcm", stored, slope=-1.0, intercept=0.0, window=None))
    assert np.all(np.diff(no_window.pixels[0].astype(int)) < 0)
    windowed = read_image(fd.write_ct(tmp_path / "negw.dcm", stored, slope=-1.0, intercept=0.0, window=(-2000, 4001)))
    row = windowed.pixels[0].astype(int)
    assert row[0] == 255 and row[-1] == 0 and row[2] == 128


def test_voi_lut_sequence_wins_over_window(tmp_path):
    stored = np.array([[0, 1000, 1999, 2000, 3000, 4095]], np.uint16).repeat(2, axis=0)
    lut = np.where(np.arange(4096) < 2000, 0, 65535)
    converted = read_image(fd.write_with_voi_lut(tmp_path / "voi.dcm", stored, lut))
    # a threshold LUT: the 2048/4096 window would have given greys instead
    assert converted.pixels[0].tolist() == [0, 0, 0, 255, 255, 255]
    assert converted.params["window"]["source"] == "file VOI LUT"
    assert converted.params["window"]["explanation"] == "TEST LUT"


def test_rgb_is_kept_exactly(tmp_path):
    rgb = _colour_blocks()
    converted = read_image(fd.write_rgb(tmp_path / "rgb.dcm", rgb))
    assert converted.mode == "RGB" and np.array_equal(converted.pixels, rgb)


def test_ybr_full_is_converted_to_rgb_once(tmp_path):
    rgb = _colour_blocks()
    converted = read_image(fd.write_rgb(tmp_path / "ybr.dcm", rgb, photometric="YBR_FULL"))
    assert np.abs(converted.pixels.astype(int) - rgb).max() <= 2
    assert "converted to RGB" in converted.params["colour"]


def test_ybr_full_422_jpeg_baseline_decodes_to_the_original_colours(tmp_path):
    rgb = _colour_blocks(block=16)
    converted = read_image(fd.write_jpeg_baseline(tmp_path / "us.dcm", rgb))
    assert converted.params["photometric_interpretation"] == "YBR_FULL_422"
    assert converted.params["decoder"] in ("gdcm", "pillow")
    # compare block centres (JPEG is lossy at edges); YBR left as YCbCr or converted twice is far off
    for y in (8, 24):
        for x in (8, 24, 40):
            assert np.abs(converted.pixels[y, x].astype(int) - rgb[y, x]).max() <= 12, (y, x)


def test_ybr_full_422_native_matches_the_rgb_original():
    # pydicom ships the same colour-bar image as RGB (RLE) and as native YBR_FULL_422
    rgb = read_image(get_testdata_file("SC_rgb_rle.dcm")).pixels.astype(int)
    ybr = read_image(get_testdata_file("SC_ybr_full_422_uncompressed.dcm")).pixels.astype(int)
    assert np.abs(rgb - ybr).mean() < 3


def test_icc_profile_is_applied_to_colour_images(tmp_path):
    rgb = _colour_blocks()
    profile = fr.swapped_primaries_profile()
    ds = fd.base_dataset()
    ds.set_pixel_data(rgb, "RGB", 8)
    ds.ICCProfile = profile
    converted = read_image(fd.save(ds, tmp_path / "photo.dcm"))
    expected = ImageCms.profileToProfile(
        Image.fromarray(rgb), ImageCms.ImageCmsProfile(io.BytesIO(profile)), ImageCms.createProfile("sRGB"),
        outputMode="RGB",
    )
    assert np.array_equal(converted.pixels, np.asarray(expected))
    assert not np.array_equal(converted.pixels, rgb)
    assert converted.params["icc"] == "ICC profile applied, converted to sRGB"


def test_palette_color_uses_the_lut(tmp_path):
    palette = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [10, 20, 250]], np.uint8)
    indices = np.array([[0, 1], [2, 3]], np.uint8).repeat(4, axis=0).repeat(4, axis=1)
    converted = read_image(fd.write_palette(tmp_path / "pal.dcm", indices, palette))
    assert converted.mode == "RGB"
    assert converted.pixels[0, 0].tolist() == [0, 0, 0]
    assert converted.pixels[0, 7].tolist() == [255, 0, 0]
    assert converted.pixels[7, 0].tolist() == [0, 255, 0]
    assert converted.pixels[7, 7].tolist() == [10, 20, 250]


LOSSLESS_SYNTAXES = [
    ExplicitVRLittleEndian, ImplicitVRLittleEndian, ExplicitVRBigEndian, DeflatedExplicitVRLittleEndian,
    RLELossless, JPEGLSLossless, JPEG2000Lossless,
]


@pytest.mark.parametrize("syntax", LOSSLESS_SYNTAXES, ids=lambda uid: uid.name)
def test_lossless_transfer_syntaxes_give_identical_pixels(tmp_path, syntax):
    stored = fd.ct_ramp(32, 48)
    reference = read_image(fd.write_ct(tmp_path / "ref.dcm", stored, window=None)).pixels
    if syntax == DeflatedExplicitVRLittleEndian:
        ds = fd.ct_dataset(stored, window=None)
        path = fd.save(ds, tmp_path / "x.dcm", DeflatedExplicitVRLittleEndian)
    else:
        path = fd.write_ct(tmp_path / "x.dcm", stored, transfer_syntax=syntax, window=None)
    converted = read_image(path)
    assert converted.params["transfer_syntax_uid"] == syntax
    assert np.array_equal(converted.pixels, reference)


def test_decoder_plugin_is_recorded(tmp_path):
    stored = fd.ct_ramp(64, 64)
    expectations = {RLELossless: "pylibjpeg", JPEGLSLossless: "pyjpegls", JPEG2000Lossless: "pylibjpeg"}
    for syntax, plugin in expectations.items():
        converted = read_image(fd.write_ct(tmp_path / f"{syntax.name}.dcm", stored, transfer_syntax=syntax))
        assert converted.params["decoder"] == plugin


def test_jpeg_2000_lossy_is_close(tmp_path):
    stored = fd.ct_ramp(32, 32)
    ds = fd.ct_dataset(stored, window=None)
    ds.compress(JPEG2000, j2k_cr=[5])
    converted = read_image(fd.save(ds, tmp_path / "j2k.dcm"))
    reference = read_image(fd.write_ct(tmp_path / "ref.dcm", stored, window=None)).pixels
    assert np.abs(converted.pixels.astype(int) - reference).max() <= 8


def test_jpeg_lossless_sv1_decodes_exactly(tmp_path):
    import imagecodecs  # a declared dependency; its lossless JPEG encoder writes the frame

    stored = fd.ct_ramp(16, 24)
    ds = fd.ct_dataset(stored, window=None)
    reference = read_image(fd.save(ds, tmp_path / "ref.dcm")).pixels
    frame = imagecodecs.ljpeg_encode(stored.astype(np.uint16), bitspersample=12)
    ds.PixelData = encapsulate([frame])
    ds["PixelData"].VR = "OB"
    converted = read_image(fd.save(ds, tmp_path / "ljpeg.dcm", JPEGLosslessSV1))
    assert converted.params["decoder"] == "gdcm"
    assert np.array_equal(converted.pixels, reference)


def test_twelve_bit_jpeg_without_a_permissive_decoder_is_a_clear_error(tmp_path):
    # pydicom's own 12-bit JPEG Extended sample: only the GPL libjpeg backend could decode it
    path = tmp_path / "jpeg12.dcm"
    shutil.copy(get_testdata_file("JPGExtended.dcm"), path)
    with pytest.raises(ConversionError, match=r"jpeg12\.dcm \(JPEG Extended.*could not be decoded.*GPL"):
        read_image(path)


def test_multiframe_takes_the_middle_frame_or_the_requested_one(tmp_path):
    frames = np.stack([np.full((8, 8), 1024 + 100 * k, np.uint16) for k in range(5)])
    frames[:, 0, 0] = 0  # a dark pixel in every frame so the window is not degenerate
    frames[:, 0, 1] = 4095
    for syntax in (ExplicitVRLittleEndian, RLELossless):
        path = fd.write_multiframe(tmp_path / f"mf-{syntax.name}.dcm", frames, transfer_syntax=syntax)
        middle = read_image(path)
        assert middle.frame == 2 and middle.params["frames"] == 5
        requested = read_image(path, ConvertOptions(frame=4))
        assert requested.frame == 4
        assert requested.pixels[4, 4] > middle.pixels[4, 4]  # frame 4 holds brighter values than frame 2
    with pytest.raises(ConversionError, match="frame 7 was requested .* has 5 frame"):
        read_image(path, ConvertOptions(frame=7))


def test_enhanced_multiframe_uses_each_frames_own_window(tmp_path):
    frames = np.full((3, 8, 8), 1064, np.uint16)  # 40 HU everywhere
    windows = [(40, 400), (540, 400), (-460, 400)]
    path = fd.write_multiframe(tmp_path / "enh.dcm", frames, per_frame_windows=windows)
    greys = [int(read_image(path, ConvertOptions(frame=k)).pixels[0, 0]) for k in range(3)]
    assert greys == [128, 0, 255]
    assert read_image(path).params["window"]["center"] == 540  # the middle frame's own window


def test_file_without_preamble_or_meta_is_read(tmp_path):
    for syntax in (ImplicitVRLittleEndian, ExplicitVRLittleEndian, ExplicitVRBigEndian):
        ds = fd.ct_dataset(CT_STORED, window=(40, 400))
        ds.file_meta.TransferSyntaxUID = syntax
        path = fd.save(ds, tmp_path / f"raw-{syntax.name}", file_meta=False)
        assert path.read_bytes()[128:132] != b"DICM"
        converted = read_image(path)
        assert converted.pixels[0].tolist() == [0, 0, 128, 255, 255], syntax.name
        assert converted.params["transfer_syntax_uid"] == syntax


def test_dicom_named_png_is_still_dicom(tmp_path):
    path = fd.write_ct(tmp_path / "scan.png", CT_STORED)
    converted = read_image(path)
    assert converted.format == "dicom" and converted.pixels[0, 2] == 128


def test_truncated_pixel_data_is_a_clear_error(tmp_path):
    path = fd.write_ct(tmp_path / "cut.dcm", fd.ct_ramp(64, 64))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ConversionError, match=r"cut\.dcm has pixel data that is truncated or corrupt"):
        read_image(path)


def test_transfer_syntax_pydicom_cannot_decode_is_a_clear_error(tmp_path):
    ds = fd.ct_dataset(fd.ct_ramp(16, 16))
    ds.PixelData = encapsulate([b"\x00\x00\x01\xb3" + b"\x00" * 60])  # an MPEG-2 sequence header start
    ds["PixelData"].VR = "OB"
    path = fd.save(ds, tmp_path / "video.dcm", UID("1.2.840.10008.1.2.4.100"))
    with pytest.raises(ConversionError, match=r"video\.dcm uses the transfer syntax MPEG2 .*which pydicom cannot decode"):
        read_image(path)


def test_dicom_without_pixels_is_a_clear_error(tmp_path):
    path = tmp_path / "plan.dcm"
    shutil.copy(get_testdata_file("rtplan.dcm"), path)
    with pytest.raises(ConversionError, match=r"plan\.dcm is a DICOM RT Plan Storage without image pixel data"):
        read_image(path)


def test_mask_keeps_stored_labels(tmp_path):
    labels = np.zeros((8, 8), np.uint16)
    labels[2:6, 2:6] = 3
    ds = fd.base_dataset()
    ds.set_pixel_data(labels.astype(np.uint8), "MONOCHROME2", 8)
    converted = read_image(fd.save(ds, tmp_path / "seg.dcm"), ConvertOptions(as_mask=True))
    assert converted.pixels.tolist() == labels.tolist()


def _colour_blocks(block: int = 8) -> np.ndarray:
    colours = np.array([[[200, 30, 30], [30, 200, 30], [30, 30, 200]], [[240, 240, 40], [40, 240, 240], [128, 128, 128]]],
                       np.uint8)
    return colours.repeat(block, axis=0).repeat(block, axis=1)


@pytest.mark.parametrize("window", [(40, 400), (-600, 1500), (1000, 1), (3.7, 2.2), (500, 10_000)])
@pytest.mark.parametrize("slope", [1.0, -2.0, 0.5])
def test_linear_window_matches_pydicom(tmp_path, window, slope):
    # the LINEAR fast path must agree with pydicom's apply_voi_lut scaled by its output range
    from pydicom import dcmread
    from pydicom.pixels import apply_modality_lut, apply_voi_lut

    stored = np.random.default_rng(1).integers(0, 4096, (32, 32)).astype(np.uint16)
    path = fd.write_ct(tmp_path / "w.dcm", stored, slope=slope, window=window)
    ds = dcmread(path)
    modality = apply_modality_lut(ds.pixel_array, ds)
    ends = apply_voi_lut(np.array([-np.inf, np.inf]), ds, prefer_lut=False)
    expected = np.rint((apply_voi_lut(modality, ds) - ends[0]) / (ends[1] - ends[0]) * 255)
    converted = read_image(path).pixels.astype(int)
    assert np.abs(converted - expected).max() <= 1
    assert np.mean(converted != expected) < 0.01


def test_only_the_chosen_frame_is_decoded(tmp_path):
    # frame 0's RLE data is destroyed: the middle frame must still convert, because nothing else is decoded
    from pydicom.encaps import generate_frames

    frames = np.stack([np.full((16, 16), 500 * k, np.uint16) for k in range(5)])
    frames[:, 0, 0] = 4095
    ds = fd.ct_dataset(frames[0], window=None)
    ds.set_pixel_data(frames, "MONOCHROME2", 12)
    ds.compress(RLELossless)
    encoded = list(generate_frames(ds.PixelData, number_of_frames=5))
    encoded[0] = b"\xff" * len(encoded[0])
    ds.PixelData = encapsulate(encoded)
    path = fd.save(ds, tmp_path / "damaged.dcm")
    assert read_image(path).frame == 2
    with pytest.raises(ConversionError, match=r"damaged\.dcm \(RLE Lossless\) could not be decoded"):
        read_image(path, ConvertOptions(frame=0))
