"""Build: fetch, convert, lay out, normalise, instantiate questions and write the release.

Always import as `mmbu.build`; the bare name `build` is the PyPA build tool.
"""
