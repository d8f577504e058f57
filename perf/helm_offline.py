"""Lay out an offline crfm-helm 0.5.16 run of the MedHELM public tier, for side-by-side benches.

`prepare(shared, root, output_path, suite)` stages everything so that `helm-run` (started in `root`
with `--output-path <output_path> --suite <suite>` and the returned environment) downloads nothing,
exactly as the golden public run was made (../shared/reference/public-oracle.md §2 for where each
file goes, §3 for the shims; ../shared/README.md "How the golden files were made"):

1. every upstream file of ../shared/data/public is copied to the path HELM's downloader checks under
   `<output_path>/scenarios/<scenario>/` (`ensure_file_downloaded` and the mtsamples
   `download_file` skip a target that exists);
2. a shim directory (put on PYTHONPATH for helm-run only) holds a `sitecustomize.py` that answers
   four `datasets.load_dataset` keys from the parquet stand-ins and the two GitHub contents-API
   listings of the mtsamples scenarios from their git trees; every other call goes to the real
   function; it is inert unless `HELM_PUBLIC_SHIM_MANIFEST` is set;
3. the same directory holds a stub `en_core_web_sm` (spaCy's blank English pipeline) with a
   `.dist-info`, so `spacy.load("en_core_web_sm")` finds it without touching HELM's venv;
4. an empty-dict `qafacteval.pk` is seeded in `<output_path>/runs/<suite>/eval_cache/`;
5. tiktoken's BPE files (o200k_base, cl100k_base: the prod_env's tokenizers) are copied, under
   tiktoken's cache names, into a directory named by `TIKTOKEN_CACHE_DIR`.

Not run offline (no data): med_dialog, medhelm_med_mcqa; the bench drops them from the conf.
"""
from __future__ import annotations

import json
import pickle
import shutil
import urllib.parse
import zipfile
from pathlib import Path

from medhelm_core.tokenizers import bundled_bpe_file, tiktoken_cache_name

MANIFEST_ENV = "HELM_PUBLIC_SHIM_MANIFEST"
TIKTOKEN_ENCODINGS = ("o200k_base", "cl100k_base")  # examples/prod_env_public_apis's tokenizers
GITHUB_LISTING_LIMIT = 1000  # the contents API lists at most 1,000 entries of a directory

# (file under shared/data/public, where HELM 0.5.16 looks for it under <output_path>/scenarios/)
PLACED = [
    ("aci_bench/train_full.json", "aci_bench/aci_bench_train.json"),
    # aci_bench's TEST_URLS order: taskB_test1, clef_taskC_test3, taskC_test2 -> test_1, _2, _3
    ("aci_bench/clinicalnlp_taskB_test1_full.json", "aci_bench/aci_bench_test_1.json"),
    ("aci_bench/clef_taskC_test3_full.json", "aci_bench/aci_bench_test_2.json"),
    ("aci_bench/clinicalnlp_taskC_test2_full.json", "aci_bench/aci_bench_test_3.json"),
    ("ehr_sql/eicu.sqlite", "ehr_sql/eicu.sqlite"),
    ("ehr_sql/eicu.sql", "ehr_sql/eicu.sql"),
    ("ehr_sql/valid.json", "ehr_sql/ehrsql_valid.json"),
    ("ehr_sql/test.json", "ehr_sql/ehrsql_test.json"),
    ("medbullets/medbullets_op5.csv", "medbullets/medbullets_op5.csv"),
    ("medec/MEDEC-MS-TestSet-with-GroundTruth-and-ErrorType.csv", "medec/medec_test.csv"),
    ("medication_qa/MedInfo2019-QA-Medications.xlsx", "medication_qa/MedInfo2019-QA-Medications.xlsx"),
    ("pubmed_qa/ori_pqal.json", "pubmed_qa/data/test_set.json"),
    # HELM builds race_based.csv from the docx itself when the csv is absent
    ("race_based_med/41746_2023_939_MOESM1_ESM.docx", "race_based_med/race_based.docx"),
]
# medhelm_med_qa runs MedQAScenario (name "med_qa"): the unzip target `data/` existing skips the
# Google-Drive download; the train file is the placeholder of shared/ (only shifts instance ids).
MED_QA_DIR = "med_qa/data/data_clean/questions/US/4_options"
MED_QA_SPLITS = ("train", "dev", "test")
# ehr_sql's train.json is absent from EHRSQL's snapshot; benchmarkdata's eicu.zip has it byte-identical.
EHR_SQL_TRAIN = ("ehr_sql/eicu.zip", "eicu/train.json", "ehr_sql/ehrsql_train.json")

# load_dataset (path, name) -> folder under shared/data/public/huggingface/ (one <split>.parquet each)
HF_DATASETS = {
    "dvilares/head_qa|en": "dvilares__head_qa__en",
    "ncbi/MedCalc-Bench|": "ncbi__MedCalc-Bench",
    "UTAustin-AIHealth/MedHallu|pqa_labeled": "UTAustin-AIHealth__MedHallu__pqa_labeled",
    "bigbio/mediqa_qa|": "bigbio__mediqa_qa",
}

# The two exact URLs HELM's mtsamples scenarios list with requests.get; scenario folder, tree file,
# and the ref GitHub would put in download_url (replicate is pinned, procedures reads the default branch).
REPO = "raulista1997/benchmarkdata"
LISTINGS = {
    f"https://api.github.com/repos/{REPO}/contents/mtsamples_processed?ref=ebc104a4f96c5b7602242f301e081e9934a23344":
        ("mtsamples_replicate", "mtsamples_replicate/mtsamples_processed.tree.json",
         "ebc104a4f96c5b7602242f301e081e9934a23344"),
    f"https://api.github.com/repos/{REPO}/contents/mtsample_procedure":
        ("mtsamples_procedures", "mtsamples_procedures/mtsample_procedure.tree.json", "main"),
}

SITECUSTOMIZE = '''\
"""Offline answers for helm-run (written by perf/helm_offline.py; see its docstring)."""
import os

_MANIFEST = os.environ.get("{manifest_env}")

if _MANIFEST:
    import importlib.machinery
    import json
    import sys
    import threading

    with open(_MANIFEST) as _f:
        _M = json.load(_f)
    _LOCK = threading.Lock()

    def _log(**record):
        with _LOCK, open(_M["log"], "a") as f:
            f.write(json.dumps(record, default=str) + "\\n")

    def _patch_datasets(module):
        real = module.load_dataset

        def load_dataset(path, name=None, *args, **kwargs):
            files = _M["load_dataset"].get(f"{{path}}|{{name or ''}}")
            if files is None:
                return real(path, name, *args, **kwargs)
            split = kwargs.pop("split", None)
            _log(call="load_dataset", path=path, name=name, split=split, ignored=sorted(kwargs))
            return real("parquet", data_files=files, split=split)

        module.load_dataset = load_dataset

    def _patch_requests(module):
        real = module.get

        def get(url, *args, **kwargs):
            listing = _M["get"].get(url)
            if listing is None:
                return real(url, *args, **kwargs)
            _log(call="requests.get", url=url)
            response = module.models.Response()
            response.status_code = 200
            response.url = url
            response.encoding = "utf-8"
            response.headers["Content-Type"] = "application/json; charset=utf-8"
            with open(listing, "rb") as f:
                response._content = f.read()
            return response

        module.get = get

    _PATCHES = {{"datasets": _patch_datasets, "requests": _patch_requests}}

    class _PatchAfterImport:
        """Patches a module right after its own import ran: HELM binds `from datasets import
        load_dataset` at import time, and importing datasets here eagerly would slow every start."""

        @staticmethod
        def find_spec(fullname, path=None, target=None):
            patch = _PATCHES.get(fullname)
            if patch is None:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _PatchAfterImport)
'''

# spaCy's `spacy.load(name)` imports a package of that name when a distribution of it is installed
# (importlib.metadata), then calls its `load()`: a blank English pipeline is the rule-based tokenizer
# of the real en_core_web_sm, all summ_eval's DataStatsMetric uses.
SPACY_STUB = '''\
"""Stub en_core_web_sm for offline HELM runs: spaCy's blank English pipeline (perf/helm_offline.py)."""


def load(**overrides):
    import spacy

    return spacy.blank("en")
'''
SPACY_STUB_VERSION = "3.8.0"


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)  # copies, not links: HELM opens eicu.sqlite itself; shared/ is read-only


def _listing(tree: dict, ref: str, limit: int | None) -> list[dict]:
    """The contents-API answer for a directory, from its git tree (git tree order, cut at `limit`)."""
    out = []
    for entry in tree["entries"][:limit]:
        path = f"{tree['path']}/{entry['name']}"
        out.append({"name": entry["name"], "path": path, "sha": entry["blob"], "size": entry["size"],
                    "type": "file" if entry["type"] == "blob" else "dir",
                    "download_url": f"https://raw.githubusercontent.com/{REPO}/{ref}/{urllib.parse.quote(path)}"})
    return out


def prepare(shared: Path, root: Path, output_path: str, suite: str) -> dict[str, str]:
    """Stage an offline helm-run in `root` (its working directory); return the environment to add."""
    data = Path(shared) / "data" / "public"
    root = Path(root)
    scenarios = root / output_path / "scenarios"
    shim = root / "helm_offline"
    shim.mkdir(parents=True, exist_ok=True)

    # 1. pre-placed downloads
    for src, dst in PLACED:
        _copy(data / src, scenarios / dst)
    for split in MED_QA_SPLITS:
        name = f"phrases_no_exclude_{split}.jsonl"
        _copy(data / "medhelm_med_qa" / name, scenarios / MED_QA_DIR / name)
    zip_path, member, dst = EHR_SQL_TRAIN
    with zipfile.ZipFile(data / zip_path) as zf:
        (scenarios / dst).write_bytes(zf.read(member))

    # 2. the mtsamples listings and the files HELM would download for them; HELM writes
    # `requests.get(...).text` (UTF-8, errors replaced) as UTF-8 text, so do the same.
    get = {}
    for url, (scenario, tree_file, ref) in LISTINGS.items():
        tree = json.loads((data / tree_file).read_text())
        listing = _listing(tree, ref, GITHUB_LISTING_LIMIT)
        listing_file = shim / f"{scenario}.listing.json"
        listing_file.write_text(json.dumps(listing))
        get[url] = str(listing_file)
        target = scenarios / scenario
        target.mkdir(parents=True, exist_ok=True)
        for entry in listing:
            if entry["name"].endswith(".txt"):  # what HELM keeps of the listing
                text = (data / scenario / tree["path"] / entry["name"]).read_bytes().decode("utf-8", errors="replace")
                with open(target / entry["name"], "w", encoding="utf-8") as f:
                    f.write(text)

    hf = {}
    for key, folder in HF_DATASETS.items():
        hf[key] = {p.stem: str(p) for p in sorted((data / "huggingface" / folder).glob("*.parquet"))}
        if not hf[key]:
            raise FileNotFoundError(f"no parquet split in {data / 'huggingface' / folder}")
    manifest = shim / "manifest.json"
    manifest.write_text(json.dumps({"load_dataset": hf, "get": get, "log": str(shim / "shim_calls.jsonl")}, indent=1))
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE.format(manifest_env=MANIFEST_ENV))

    # 3. spaCy stub, found through its .dist-info next to it on PYTHONPATH
    (shim / "en_core_web_sm").mkdir(exist_ok=True)
    (shim / "en_core_web_sm" / "__init__.py").write_text(SPACY_STUB)
    dist = shim / f"en_core_web_sm-{SPACY_STUB_VERSION}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: en_core_web_sm\nVersion: {SPACY_STUB_VERSION}\n"
                                   "Summary: stub: spacy.blank('en') (perf/helm_offline.py)\n")
    (dist / "top_level.txt").write_text("en_core_web_sm\n")

    # 4. QAFactEval cache: HELM downloads it from GCS when absent; an empty dict gives "no QAFactEval
    # stat" as the real file does for MedHELM (it has no MedHELM keys).
    cache = root / output_path / "runs" / suite / "eval_cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "qafacteval.pk").write_bytes(pickle.dumps({}))

    # 5. tiktoken's BPE files under tiktoken's cache names (a copy: tiktoken may write to its cache)
    bpe = shim / "tiktoken_cache"
    bpe.mkdir(exist_ok=True)
    for encoding in TIKTOKEN_ENCODINGS:
        found = bundled_bpe_file(encoding)
        if found is None:
            raise FileNotFoundError(f"tiktoken BPE file of {encoding} not found (LiteLLM bundles it: "
                                    'pip install "medhelm-build[dspy]")')
        shutil.copyfile(found, bpe / tiktoken_cache_name(encoding))

    return {
        "PYTHONPATH": str(shim),
        MANIFEST_ENV: str(manifest),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(shim / "hf_datasets_cache"),  # parquet -> arrow, kept inside root
        "TIKTOKEN_CACHE_DIR": str(bpe),
    }
