import exactmem, time
from exactmem.sequences import random_sequences
from exactmem.cli import main
data = random_sequences(20, 4, 2, 5, 3, seed=1, task="seq2seq")
exactmem.save_dataset(data, "/tmp/h12/d1.json")
cold = exactmem.build(data, "kim23", attention="softmax", temperature=4)
exactmem.save_model(cold, "/tmp/h12/cold.json")
t = time.time()
print(main(["explain", "--model", "/tmp/h12/cold.json", "--data", "/tmp/h12/d1.json"]))
print(time.time() - t)
