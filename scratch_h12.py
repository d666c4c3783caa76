import exactmem
from dataclasses import replace
from exactmem.data import random_points
from exactmem.cli import main
pts = random_points(30, 2, 4, seed=1)
m = exactmem.build(pts, "vys")
mlp = m.sublayers[0]
first = mlp.layers[0]
bias = list(first.bias); bias[0] += 3 * first.denominator
mlp = replace(mlp, layers=(replace(first, bias=tuple(bias)), *mlp.layers[1:]))
bad = replace(m, sublayers=(mlp,))
exactmem.save_dataset(pts, "/tmp/h12/pts.json"); exactmem.save_model(bad, "/tmp/h12/badvys.json")
print(main(["explain", "--model", "/tmp/h12/badvys.json", "--data", "/tmp/h12/pts.json", "--construction", "vys"]))
