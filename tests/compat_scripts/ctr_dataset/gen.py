"""A Fluid 1.x data generator: raw lines ``click id id ... ; id id ...`` -> MultiSlot lines."""
import paddle.fluid.incubate.data_generator as dg


class CtrGen(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def reader():
            head, tail = line.split(";")
            click, *ids1 = [int(w) for w in head.split()]
            ids2 = [int(w) for w in tail.split()]
            yield [("click", [click]), ("slot1", ids1), ("slot2", ids2)]
        return reader


if __name__ == "__main__":
    CtrGen().run_from_stdin()
