"""The mechanisms each built-in checklist tests: per construction, every check it emits as a
:class:`~exactmem.checks.checklist.CheckSpec` (paper, result, mechanism) with its breakers."""
