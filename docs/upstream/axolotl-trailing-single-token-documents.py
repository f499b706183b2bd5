"""axolotl 0.19.0: get_cu_seqlens_from_pos_ids (axolotl/monkeypatch/utils.py) takes the trailing run of 0
positions of a row for its padding, so a row that ends with two or more one-token documents (each at position 0)
gets them as one sequence: the xformers, StableLM flash and ring-attention patches then let the last of them
attend the ones before it. Report: axolotl-trailing-single-token-documents.md

    python axolotl-trailing-single-token-documents.py             # exit 1 on 0.19.0: cu_seqlens [[0, 3, 5]]
    python axolotl-trailing-single-token-documents.py --with-fix  # exit 0: cu_seqlens [[0, 3, 4, 5]]
Needs axolotl 0.19.0 (its environment: requirements/axolotl.lock). Where axolotl does not import, it exits 77.
"""
import sys

import torch

try:
    from importlib.metadata import version

    import axolotl.monkeypatch.utils as utils
except ImportError as e:
    print(f"SKIP (77): needs axolotl 0.19.0 ({e})")
    sys.exit(77)

if "--with-fix" in sys.argv:  # the fix: every 0 position starts a sequence, the padding's included
    def get_cu_seqlens_from_pos_ids(position_ids):
        if position_ids.dim() == 1:
            position_ids = position_ids.unsqueeze(0)
        results, max_seq_lens = [], []
        for row in position_ids:
            starts = torch.nonzero(row == 0).flatten().to(torch.int32)
            if starts.numel() == 0 or starts[0] != 0:
                starts = torch.cat([torch.tensor([0], dtype=torch.int32, device=row.device), starts])
            cu = torch.cat([starts, torch.tensor([len(row)], dtype=torch.int32, device=row.device)])
            results.append(cu)
            max_seq_lens.append((cu[1:] - cu[:-1]).max())
        width = max(t.size(0) for t in results)
        padded = [torch.nn.functional.pad(t, (0, width - t.size(0)), "constant", int(t[-1])) for t in results]
        return torch.stack(padded).to(dtype=torch.int32), torch.stack(max_seq_lens)

    utils.get_cu_seqlens_from_pos_ids = get_cu_seqlens_from_pos_ids

# One packed row of 5 slots, no padding: documents [11, 12, 13], [21] and [31], positions reset per document
# (utils.trainer.add_position_ids), as the multipack collator concatenates them.
position_ids = torch.tensor([[0, 1, 2, 0, 0]])
cu_seqlens, _ = utils.get_cu_seqlens_from_pos_ids(position_ids)
expected = [[0, 3, 4, 5]]
if cu_seqlens.tolist() != expected:
    print(f"FAIL axolotl {version('axolotl')}: position_ids {position_ids.tolist()} give cu_seqlens "
          f"{cu_seqlens.tolist()}, not {expected}: documents [21] and [31] are one sequence")
    sys.exit(1)
print(f"OK axolotl {version('axolotl')}: position_ids {position_ids.tolist()} give cu_seqlens {cu_seqlens.tolist()}")
