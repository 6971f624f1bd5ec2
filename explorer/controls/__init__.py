"""The controls around the stages, one module a group (a stage record names its group: Stage.controls),
and the page's view of one run (``Page``) that they and explorer/main.py share.

    CONTROLS[group] = (before, after)   # before the group's first stage: returns {stage id: options};
                                        # after each stage of the group: draws under it

Each module registers its groups in ``base.CONTROLS`` when imported (explorer/main.py imports them all).
"""
