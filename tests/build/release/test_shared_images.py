"""Release images shared by the rows that use them (issue 32, point 3): a dataset of many masks per image wrote
its image again in every mask row (40 MB of masks became a 5 GB release). A config's rows are ordered by image,
then sample id, and the image bytes are dictionary-encoded, so a row group stores each image once; the column
contract is unchanged and `load_dataset` gives every row its image."""
from __future__ import annotations

import datasets
import numpy as np
import pyarrow.parquet as pq
from PIL import Image

from mmbu.build.release import write_release

INSTANCES = 12  # mask rows per image


def test_an_image_shared_by_its_mask_rows_is_stored_once_and_loads_for_each(built, tmp_path):
    rows = built["rows_by_task"]["mask_grounded_classification"]
    images = rows.drop_duplicates("image").head(4)
    many = images.loc[images.index.repeat(INSTANCES)].reset_index(drop=True)
    many["image_sample_id"] = many["image_sample_id"].fillna(many["sample_id"])
    many["sample_id"] = [f"{sid}-{k:03d}" for k, sid in enumerate(many["sample_id"])]  # each a row of its own
    out = tmp_path / "release"
    summary = write_release({"mask_grounded_classification": many}, out, built["manifests"], built["build_info"])

    shard, = summary.shards["mask_grounded_classification"]
    image_bytes = sum(open(path, "rb").read().__len__() for path in images["image"])
    stored = pq.ParquetFile(shard).metadata
    stored_images = sum(stored.row_group(g).column(i).total_compressed_size for g in range(stored.num_row_groups)
                        for i in range(stored.num_columns) if stored.row_group(g).column(i).path_in_schema == "image.bytes")
    assert stored_images < 1.2 * image_bytes  # not INSTANCES times
    digests = pq.read_table(shard, columns=["image_sha256"]).column("image_sha256").to_pylist()
    runs = [digest for k, digest in enumerate(digests) if k == 0 or digests[k - 1] != digest]
    assert len(runs) == len(set(digests)) == len(images)  # an image's rows together

    loaded = datasets.load_dataset(str(out), "mask_grounded_classification", split="test",
                                   cache_dir=str(tmp_path / "hf-cache"))
    assert len(loaded) == len(many)
    by_id = dict(zip(many["sample_id"], many["image"]))
    for row in loaded.select(range(0, len(loaded), 5)):
        assert np.array_equal(np.asarray(row["image"]), np.asarray(Image.open(by_id[row["sample_id"]])))
