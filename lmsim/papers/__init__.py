"""Each paper's protocol, one package per chapter of the book, named as ``book/<slug>``.

A chapter's package holds that paper's setups, the claims its pages register (with the
paper's rules and values), the paper's and the authors' published tables and its page
helpers. Papers import the general library (:mod:`lmsim.lmd`, :mod:`lmsim.merge`,
:mod:`lmsim.probe`, ...); nothing in the library imports ``lmsim.papers``, and no chapter
imports another (``tests/test_structure.py`` checks both).

- :mod:`lmsim.papers.zhang2022_lmd` — language model decomposition (Zhang, 2022)
- :mod:`lmsim.papers.wu2020_similarity` — similarity analysis (Wu et al., 2020)
- :mod:`lmsim.papers.jin2023_regmean` — RegMean merging (Jin et al., 2023)
- :mod:`lmsim.papers.thesis2022_redundancy` — distillation and redundancy (thesis, 2022)
- :mod:`lmsim.papers.he2022_twotower` — two-tower LM preference (He & Toyoizumi, 2022)
"""
