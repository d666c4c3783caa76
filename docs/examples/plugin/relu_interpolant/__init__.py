"""The one-hidden-layer ReLU network with N neurons that interpolates N points on the line,
registered with exactmem as the construction ``relu-interpolant`` (:mod:`.plugin`)."""
