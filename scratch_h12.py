import exactmem
from exactmem.sequences import random_sequences
from exactmem.data import save_dataset
ds = random_sequences(20, 4, 2, 5, 3, seed=3, task="seq2seq")
save_dataset(ds, "/tmp/h12/ds.json")
m = exactmem.build(ds, "kim23", functional_bound=1, seed=3, id_multiplier=1965)
exactmem.save_model(m, "/tmp/h12/weak.json")
m = exactmem.build(ds, "kim23", attention="softmax", temperature=4)
exactmem.save_model(m, "/tmp/h12/soft.json")
