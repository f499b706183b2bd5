"""OLMo-core 3.0.0: NumpyPackedFSLDataset(sequence_length=L).prepare() fails for any L that is not a power of two:
the best-fit packer's SegmentTree(L) asserts 'N should be a power of 2'. Report: olmo-core-power-of-two.md

    python olmo-core-power-of-two.py             # exit 1 on 3.0.0: AssertionError at sequence_length=3
    python olmo-core-power-of-two.py --with-fix  # exit 0: SegmentTree built over the next power of two
"""
import os
import sys
import tempfile
from importlib.metadata import version

import numpy as np
from olmo_core.data import utils
from olmo_core.data.numpy_dataset import NumpyPackedFSLDataset

_original_init = utils.SegmentTree.__init__


def segment_tree_init_padded(self, N):
    """The proposed fix: the tree over the next power of two M >= N, the leaves past N never offered (weight 0)."""
    M = 1 << (N - 1).bit_length()
    _original_init(self, M)
    self.leaf_nodes[M - 1].update(0)
    self.leaf_nodes[N - 1].update(N)  # a new instance offers N slots, as the original tree's last leaf does


if "--with-fix" in sys.argv:
    utils.SegmentTree.__init__ = segment_tree_init_padded

EOS, PAD, L = 2, 0, 3
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "part-0.npy")
    np.asarray([5, EOS, 6, 7, EOS], dtype=np.uint32).tofile(path)  # two documents: [5 EOS], [6 7 EOS]
    dataset = NumpyPackedFSLDataset(path, sequence_length=L, pad_token_id=PAD, eos_token_id=EOS,
                                    vocab_size=1 << 16, dtype=np.uint32, generate_doc_lengths=True)
    dataset.work_dir = tmp
    try:
        dataset.prepare()
    except AssertionError as e:
        print(f"FAIL ai2-olmo-core {version('ai2-olmo-core')}: NumpyPackedFSLDataset(sequence_length={L}).prepare() "
              f"raised AssertionError: {e}")
        sys.exit(1)
    rows = [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]
print(f"OK ai2-olmo-core {version('ai2-olmo-core')}: sequence_length={L} packs into {rows}")
