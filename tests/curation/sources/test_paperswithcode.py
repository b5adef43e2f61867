"""The offline Papers with Code index: building it from a dump, BM25 search, leads to real hosts."""
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmbu.curation.sources.paperswithcode import PwcIndex, PwcIndexError, build_index, lead_refs

DATA = Path(__file__).parent / "data"
INDEX = DATA / "pwc-index.jsonl"
DUMP = DATA / "pwc-datasets-sample.json"


def test_committed_index_records_its_provenance():
    index = PwcIndex(INDEX)
    assert index.header["revision"] == "56cc5c1938678c33dedebf5f74fc4e62e2c35381"
    assert index.header["license"] == "CC-BY-SA-4.0" and "pwc-archive" in index.header["attribution"]
    assert len(index.header["sha256"]) == 64 and index.header["skipped"] == 1


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".jsonl", ".parquet"])
def test_builder_reads_every_dump_format(tmp_path, suffix):
    rows = json.loads(DUMP.read_text())
    dump = tmp_path / f"datasets{suffix}"
    if suffix == ".json":
        dump.write_text(json.dumps(rows))
    elif suffix == ".json.gz":
        dump.write_bytes(gzip.compress(json.dumps(rows).encode()))
    elif suffix == ".jsonl":
        dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), dump)  # nested paper/tasks/data_loaders as parquet structs
    out = tmp_path / "index.jsonl"
    assert build_index(dump, out, revision="abc") == 6
    index = PwcIndex(out)
    assert [lead.name for lead in index.search(["chest"], image_only=False)][:1] == ["Chest lines and tubes"]
    (isic,) = index.search(["dermoscopy"])
    assert [r.ref for r in lead_refs(isic)] == ["huggingface:derm/isic-demo"] and isic.tasks == ["Lesion Segmentation"]


def test_search_ranks_by_bm25_and_keeps_image_records(monkeypatch):
    monkeypatch.setenv("MMBU_PWC_INDEX", str(INDEX))
    index = PwcIndex()
    names = [lead.name for lead in index.search(["chest x-ray"])]
    assert "MedNLI" not in names  # text-only record filtered out
    assert set(names) == {"CheXpert", "VQA-RAD"}
    assert index.search(["chest radiograph", "human"]) == []  # every phrase must match


def test_leads_resolve_to_real_hosts():
    index = PwcIndex(INDEX)
    leads = {lead.id: lead for words in (["images"], ["chest"]) for lead in index.search(words, limit=50)}
    assert [r.ref for r in lead_refs(leads["blood-cell-smears"])] == ["zenodo:11020001"]
    assert [r.ref for r in lead_refs(leads["isic-dermoscopy-demo"])] == ["huggingface:derm/isic-demo"]
    assert lead_refs(leads["chexpert"]) == []


def test_bad_index_files(tmp_path, monkeypatch):
    monkeypatch.delenv("MMBU_PWC_INDEX", raising=False)
    with pytest.raises(PwcIndexError, match="set MMBU_PWC_INDEX"):
        PwcIndex()
    bogus = tmp_path / "x.jsonl"
    bogus.write_text('{"name": "not a header"}\n')
    with pytest.raises(PwcIndexError, match="line 1 is not an mmbu-pwc-index header"):
        PwcIndex(bogus)
