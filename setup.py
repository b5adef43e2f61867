"""Map the repository's top-level folders into the single `mmbu` namespace.

`pyproject.toml` holds the metadata; this file only computes the package list, so a new
sub-folder with an `__init__.py` under any stage is packaged without editing a list.
"""
from setuptools import find_packages, setup

STAGE_FOLDERS = {
    "mmbu": "mmbu",
    "mmbu.core": "core",
    "mmbu.taxonomy": "taxonomy",
    "mmbu.curation": "curation",
    "mmbu.build": "build",
    "mmbu.benchmark_eval": "benchmark_eval",
}

packages, package_dir = [], {}
for package, folder in STAGE_FOLDERS.items():
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
