"""The built-in constructions, each registered as a plugin through the same entry-point group
a third party uses (:mod:`exactmem.registry`). A module here imports its trusted checklist
and names its builder by import path only: certifying never imports a builder."""
