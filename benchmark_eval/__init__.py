"""Evaluate VLMs on a built MMBU release: prompts, backends, runner, parser, judge, metrics, report.

Reads only a release directory; imports nothing from `mmbu.build` or `mmbu.curation`.
"""
