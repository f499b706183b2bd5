"""OLMo-core 3.0.0: with intra-document masking (generate_doc_lengths=True), get_labels shifts labels over the whole
instance, so each document's EOS is trained to predict the first token of the next, unrelated document, a token
its attention (cu_doc_lens) cannot see. Report: olmo-core-eos-target.md

    python olmo-core-eos-target.py             # exit 1 on 3.0.0: the EOS of [6 7 EOS] has target 5
    python olmo-core-eos-target.py --with-fix  # exit 0: get_labels ignores the label at each document's end
"""
import os
import sys
import tempfile
from importlib.metadata import version

import numpy as np
import torch
from olmo_core.data import utils
from olmo_core.data.collator import DataCollator
from olmo_core.data.numpy_dataset import NumpyPackedFSLDataset

_original_get_labels = utils.get_labels


def get_labels_document_aware(batch, label_ignore_index=-100):
    """The proposed fix: get_labels, then no target across a document boundary when doc_lens are given."""
    labels = _original_get_labels(batch, label_ignore_index=label_ignore_index)
    for row, lens in enumerate(batch.get("doc_lens", [])):
        ends = torch.cumsum(lens[lens > 0], 0) - 1  # each document's last slot
        labels[row, ends] = label_ignore_index
    return labels


if "--with-fix" in sys.argv:
    utils.get_labels = get_labels_document_aware  # what the train modules import, at one place

EOS, PAD, L = 2, 0, 8
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "part-0.npy")
    np.asarray([5, EOS, 6, 7, EOS], dtype=np.uint32).tofile(path)  # two documents: [5 EOS], [6 7 EOS]
    dataset = NumpyPackedFSLDataset(path, sequence_length=L, pad_token_id=PAD, eos_token_id=EOS,
                                    vocab_size=1 << 16, dtype=np.uint32, generate_doc_lengths=True)
    dataset.work_dir = tmp
    dataset.prepare()
    batch = DataCollator(pad_token_id=PAD)([dataset[0]])
labels = utils.get_labels(batch)  # as TransformerTrainModule.train_batch calls it
tokens, doc_lens = batch["input_ids"][0].tolist(), batch["doc_lens"][0].tolist()
print(f"instance {tokens}, doc_lens {doc_lens}, labels {labels[0].tolist()}")
ends = np.cumsum([n for n in doc_lens if n])[:-1] - 1  # the last slot of every document but the row's last
crossing = [(int(i), tokens[i], int(labels[0, i])) for i in ends if labels[0, i] != -100]
if crossing:
    i, token, target = crossing[0]
    print(f"FAIL ai2-olmo-core {version('ai2-olmo-core')}: slot {i} (token {token}, the end of a document) is "
          f"trained to predict {target}, the first token of the next document (want -100)")
    sys.exit(1)
print(f"OK ai2-olmo-core {version('ai2-olmo-core')}: no target crosses a document boundary")
