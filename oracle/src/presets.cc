#include "packoracle/oracle/presets.h"

#include "packoracle/oracle/error.h"

namespace packoracle {
namespace {

// Each preset starts from the reference policy (the Policy defaults) and states every difference.
std::vector<Preset> BuildPresets() {
  std::vector<Preset> out;

  {
    Preset p{"reference", "packoracle (the lesson's contract)",
             "document isolation: doc_causal, positions reset, boundary target excluded, global token mean",
             "pre_shifted labels so that a row can hold the lesson's 9-token window", Policy{}};
    out.push_back(p);
  }
  {
    Policy q;
    q.label_alignment = LabelAlignment::kAligned;
    q.boundary_source = BoundarySource::kCuSeqlens;
    q.padding = Padding::kNone;
    out.push_back({"hf-flatten",
                   "huggingface/transformers DataCollatorWithFlattening (PR #36456, return_flash_attn_kwargs) + "
                   "Trainer num_items_in_batch (>= 4.46; average_tokens_across_devices default since 4.54)",
                   "one flattened row per micro-batch, labels[doc start] = -100 (separator), positions reset, "
                   "cu_seq_lens for flash-attention varlen",
                   "the collator has no row length: the kit's row length is the token budget of a micro-batch",
                   q});
  }
  {
    Policy q;
    q.label_alignment = LabelAlignment::kAligned;
    q.boundary_source = BoundarySource::kNone;
    q.attention = Attention::kRowCausal;
    q.positions = Positions::kRowContinuous;
    q.boundary_target = BoundaryTarget::kIncluded;
    out.push_back({"hf-padded",
                   "huggingface/transformers DataCollatorForLanguageModeling(mlm=False) + Trainer (count exact "
                   "since PR #46204, 2026-05; set count_basis unshifted_labels for earlier versions)",
                   "one document per row, right padding masked by a 2-D attention_mask, labels = input_ids",
                   "boundary_target is declared included: with one document per row it never arises, and it "
                   "makes the label of a row's first token the token itself, as the collator writes it",
                   q});
  }
  {
    Policy q;
    q.label_alignment = LabelAlignment::kAligned;
    q.boundary_source = BoundarySource::kPositionReset;
    q.pad_keys = PadKeys::kOwnSegment;
    q.pad_positions = PadPositions::kZero;
    q.padding = Padding::kNone;
    q.overflow = Overflow::kTruncate;
    out.push_back({"trl-padding-free",
                   "huggingface/trl >= v0.23.1 (PR #4170) SFTTrainer padding_free / pack_dataset bfd + "
                   "DataCollatorForLanguageModeling",
                   "flattened row, positions reset from seq_lengths, labels[position_ids == 0] = -100, no "
                   "attention_mask (flash-attention derives boundaries from positions)",
                   "pack_dataset bfd truncates long documents (bfd_split splits them); pad_to_multiple_of pads "
                   "with position 0, each pad a one-token segment",
                   q});
  }
  {
    Policy q = out.back().policy;
    q.boundary_target = BoundaryTarget::kIncluded;
    out.push_back({"trl-padding-free-legacy", "huggingface/trl <= v0.23.0 padding-free collator",
                   "as trl-padding-free, but document starts were not masked: the boundary target is trained",
                   "", q});
  }
  {
    Policy q;
    q.label_alignment = LabelAlignment::kAligned;
    q.boundary_source = BoundarySource::kNone;
    q.attention = Attention::kRowCausal;
    q.positions = Positions::kRowContinuous;
    q.boundary_target = BoundaryTarget::kIncluded;
    q.stream_stride = StreamStride::kL;
    q.overflow = Overflow::kSplit;
    out.push_back({"trl-wrapped", "huggingface/trl pack_dataset(strategy=\"wrapped\") (also ConstantLengthDataset)",
                   "documents concatenated and cut every L tokens, attention across documents, the row-end "
                   "target lost",
                   "SFTTrainer appends EOS while preparing the dataset, not while packing: give it in the "
                   "documents or set eos_id",
                   q});
  }
  {
    Policy q;
    q.boundary_source = BoundarySource::kSeqLens;
    q.pad_keys = PadKeys::kOwnSegment;
    q.pad_positions = PadPositions::kContinue;
    q.split_positions = SplitPositions::kModulo;
    out.push_back({"torchtune-packed",
                   "pytorch/torchtune PackedDataset @ bd2a0fc (labels shifted per sample since PR #2613, "
                   "2025-04) + padded_collate_packed + full_finetune_distributed",
                   "greedy packs padded to max_seq_len, seq_lens with a padding segment, block-causal mask, "
                   "input_pos reset per sample, global token mean via scale_grads(world_size / num_tokens)",
                   "split_across_pack=True: set overflow split and row_end_target next_in_doc",
                   q});
  }
  {
    Policy q;
    q.loss_mask = true;
    q.boundary_source = BoundarySource::kEodCloses;
    q.attention = Attention::kRowCausal;
    q.pad_keys = PadKeys::kVisible;
    q.positions = Positions::kRowContinuous;
    q.pad_positions = PadPositions::kContinue;
    q.split_positions = SplitPositions::kRestart;
    q.boundary_target = BoundaryTarget::kIncluded;
    q.row_end_target = RowEndTarget::kNextInStream;
    q.stream_stride = StreamStride::kL;
    q.overflow = Overflow::kSplit;
    q.eos_id = 0;
    q.denominator = Denominator::kMicrobatchMean;
    out.push_back({"megatron-gpt",
                   "NVIDIA/Megatron-LM @ d98e8a6 GPTDataset (add_extra_token_to_sequence, --append-eod), default "
                   "flags, calculate_per_token_loss=False",
                   "stream windows overlapping by one token, attention across documents, positions 0..L-1, "
                   "every prediction trained, mean of per-micro-batch means",
                   "eos_id 0 is the EOD id of the reference inputs; set your tokenizer's (GPT-2: 50256)", q});
  }
  {
    Policy q = out.back().policy;
    q.attention = Attention::kDocCausal;
    q.pad_keys = PadKeys::kOwnSegment;
    q.positions = Positions::kDocReset;
    q.pad_positions = PadPositions::kAny;
    q.boundary_target = BoundaryTarget::kExcluded;
    out.push_back({"megatron-gpt-docmask",
                   "NVIDIA/Megatron-LM @ d98e8a6 GPTDataset with --reset-position-ids --reset-attention-mask "
                   "--eod-mask-loss",
                   "as megatron-gpt, with block-causal attention, positions reset after each EOD and the "
                   "prediction made from an EOD masked",
                   "with --calculate-per-token-loss set denominator global_targets; padding after the last EOD "
                   "gets positions counted from 0 again, so pad_positions is any",
                   q});
  }
  {
    Policy q;
    q.loss_mask = true;
    q.boundary_source = BoundarySource::kCuSeqlens;
    q.pad_keys = PadKeys::kVisible;
    q.pad_positions = PadPositions::kContinue;
    out.push_back({"megatron-sft-thd",
                   "NVIDIA/Megatron-LM @ d98e8a6 SFTDataset packed (qkv_format thd, PackedSeqParams)",
                   "conversations packed into one row with cu_seqlens, positions reset per conversation, padding "
                   "continues the positions, per-token loss",
                   "the boundary target is excluded by the data (the next conversation starts with an ignored "
                   "prompt token), declared excluded here",
                   q});
  }
  {
    Policy q;
    q.boundary_source = BoundarySource::kBosOpens;
    q.attention = Attention::kRowCausal;
    q.pad_keys = PadKeys::kVisible;
    q.positions = Positions::kRowContinuous;
    q.boundary_target = BoundaryTarget::kIncluded;
    q.row_end_target = RowEndTarget::kNextInStream;
    q.stream_stride = StreamStride::kL;
    q.padding = Padding::kNone;
    q.overflow = Overflow::kSplit;
    q.bos_id = 0;
    q.denominator = Denominator::kAllPositions;
    out.push_back({"llmc", "karpathy/llm.c @ f1e2ace dataloader.h + train_gpt2.cu",
                   "EOT prepended to every document, B*T+1-token windows, attention across documents, mean over "
                   "all B*T*grad_accum positions",
                   "bos_id 0 is the EOT id of the reference inputs; set your tokenizer's (GPT-2: 50256)", q});
  }
  for (auto& preset : out) preset.policy.preset = preset.name;
  return out;
}

}  // namespace

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = BuildPresets();
  return presets;
}

const Preset& FindPreset(std::string_view name) {
  for (const auto& preset : Presets())
    if (preset.name == name) return preset;
  std::string known;
  for (const auto& preset : Presets()) known += (known.empty() ? "" : ", ") + preset.name;
  throw InputError("unknown preset '" + std::string(name) + "' (known presets: " + known + ")");
}

}  // namespace packoracle
