"""Format converters: DICOM, NIfTI, whole-slide, OME-TIFF/TIFF and raster images to PNG."""
