"""The CLIP task: towers, the contrastive loss, retrieval recall (a stand-in loader), and training through the
trainer on a pair folder (the real loaders of ``--task clip``)."""

from __future__ import annotations

import math
import signal

import pytest
import torch
from torch.nn import functional as F

from dataio.formats.errors import ConfigError
from dataio.train.clip_loss import ClipLoss, pair_loss
from dataio.train.clip_metrics import Embedded, caption_groups, recall_hits, recall_metrics
from dataio.train.clip_task import ClipTask
from dataio.train.config import TrainConfig
from dataio.train.models.clip_towers import ClipTowers, build_clip_model
from dataio.train.trainer import Trainer, TrainingInterrupted
from tests.train.pair_stand_in import CLASSES, CONTEXT, VOCAB, make_pairs, stand_in_factory

SMALL = ClipTowers(embed_dim=64, text_width=64, text_layers=1, text_heads=2)


@pytest.fixture(autouse=True)
def one_thread():
    """Small matrices: a second intra-op thread only waits for a core on the shared 2-core machine (5-8x slower)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_text_tower_sees_the_caption_and_not_its_padding():
    model = build_clip_model("small_cnn", VOCAB, CONTEXT, SMALL).eval()
    ids = torch.tensor([[1, 4, 8, 2, 0, 0, 0, 0], [1, 5, 2, 0, 0, 0, 0, 0], [0] * 8])
    mask = (torch.arange(8) < torch.tensor([4, 3, 0])[:, None]).long()
    features = model.encode_text(ids, mask)
    other_padding = ids.masked_fill(mask == 0, 7)
    assert torch.allclose(model.encode_text(other_padding, mask), features, atol=1e-6)
    changed = ids.clone()
    changed[0, 1] = 5
    assert not torch.allclose(model.encode_text(changed, mask)[0], features[0], atol=1e-3)
    assert torch.isfinite(features).all()  # an empty caption (no real token) has features too
    assert torch.allclose(features.norm(dim=1), torch.ones(3))
    with pytest.raises(ValueError, match="context_length"):
        model.encode_text(torch.zeros(1, CONTEXT + 1, dtype=torch.int64), torch.ones(1, CONTEXT + 1))


def test_features_are_unit_vectors_and_the_temperature_starts_at_1_over_0_07_and_stops_at_100():
    model = build_clip_model("small_cnn", VOCAB, CONTEXT, SMALL)
    pairs = make_pairs(4)
    images, texts, scale = model(pairs.images, pairs.input_ids, pairs.attention_mask)
    assert images.shape == texts.shape == (4, 64) and images.dtype == texts.dtype == torch.float32
    assert torch.allclose(images.norm(dim=1), torch.ones(4)) and torch.allclose(texts.norm(dim=1), torch.ones(4))
    assert scale.item() == pytest.approx(1 / 0.07, rel=1e-5)
    with torch.no_grad():
        model.logit_scale.fill_(9.0)  # what steps past the clamp would leave
    assert model(pairs.images, pairs.input_ids, pairs.attention_mask)[2].item() == pytest.approx(100.0, rel=1e-5)
    assert model.logit_scale.item() == pytest.approx(math.log(100))
    with pytest.raises(ValueError, match="unknown image tower"):
        build_clip_model("vit_huge", VOCAB, CONTEXT)
    with pytest.raises(ConfigError, match="text_width"):
        ClipTowers(text_width=30, text_heads=4)


def test_pair_loss_is_the_mean_of_both_directions_cross_entropies():
    torch.manual_seed(0)
    images, texts = F.normalize(torch.randn(6, 8), dim=1), F.normalize(torch.randn(6, 8), dim=1)
    scale = torch.tensor(5.0)
    logits = scale * images @ texts.T
    by_hand = sum(-torch.log_softmax(logits[i], 0)[i] - torch.log_softmax(logits[:, i], 0)[i] for i in range(6)) / 12
    assert pair_loss(images, texts, scale).item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert ClipLoss()(images, texts, scale).item() == pytest.approx(by_hand.item(), rel=1e-5)  # one process
    assert pair_loss(images, images, torch.tensor(100.0)).item() < 1e-3  # each pair far closer than the rest
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as the trainer calls it under AMP: float32 logits still
        amp = ClipLoss()(images.bfloat16(), texts.bfloat16(), torch.tensor(100.0))
    exact = pair_loss(images.bfloat16().float(), texts.bfloat16().float(), torch.tensor(100.0))
    assert amp.dtype == torch.float32 and amp.item() == pytest.approx(exact.item(), rel=1e-6)


def test_recall_counts_hits_by_caption_and_ranks_distinct_captions():
    eye = torch.eye(4)
    groups = torch.tensor([0, 1, 2, 3])
    assert recall_hits(eye, eye, groups, ks=(1, 2)).tolist() == [4, 4, 4, 4]
    torch.manual_seed(0)  # distinct captions: open_clip's get_clip_metrics (the paired index in the top k)
    images, texts = F.normalize(torch.randn(40, 8), dim=1), F.normalize(torch.randn(40, 8), dim=1)
    texts = F.normalize(texts + images, dim=1)  # related, so that recall is neither 0 nor 1
    logits = images @ texts.T
    ranks = {"i2t": torch.where(logits.argsort(1, descending=True) == torch.arange(40)[:, None])[1],
             "t2i": torch.where(logits.T.argsort(1, descending=True) == torch.arange(40)[:, None])[1]}
    expected = [float((ranks[d] < k).sum()) for d in ("i2t", "t2i") for k in (1, 5)]
    assert 0 < expected[0] < expected[1] < 40
    assert recall_hits(images, texts, torch.arange(40)).tolist() == expected
    # samples 0 and 1 share a caption (same text features): either of their pictures answers it, and an image
    # query ranks the three distinct captions, not the caption's copies
    texts = eye[[0, 0, 2, 3]]
    shared = torch.tensor([0, 0, 2, 3])
    assert recall_hits(eye, texts, shared, ks=(1, 2)).tolist() == [4, 4, 4, 4]
    images = torch.stack([F.normalize(eye[2] + 0.1 * eye[0], dim=0), eye[0], eye[2], eye[3]])  # picture 0 much
    # like caption 2: it ranks caption 2 first and its own second; caption 2 still ranks picture 2 first
    assert recall_hits(images, texts, shared, ks=(1, 2)).tolist() == [3, 4, 4, 4]
    assert recall_hits(eye, eye, groups, rank=1, world=2, ks=(1,)).tolist() == [2, 2]  # queries 1 and 3
    assert recall_metrics([3, 4, 2, 4, 4, 6.0, 3]) == {"i2t_r1": 0.75, "i2t_r5": 1.0, "t2i_r1": 0.5, "t2i_r5": 1.0,
                                                       "loss": 2.0}


def test_caption_groups_and_unique_drop_padding_repeats_and_sort_by_sample_id():
    ids = torch.tensor([[1, 4, 2, -1], [1, 5, 2, -1], [1, 4, 2, -1], [1, 4, 8, 2]])
    assert caption_groups(ids).tolist()[0] == caption_groups(ids).tolist()[2]
    assert len(set(caption_groups(ids).tolist())) == 3
    rows = torch.arange(5, dtype=torch.float32)[:, None].repeat(1, 2)
    found = Embedded(rows, rows, torch.zeros(5, 1, dtype=torch.int64), torch.tensor([7, 3, 5, 7, 3]),
                     torch.tensor([False, False, False, True, True])).unique()
    assert found.sample_ids.tolist() == [3, 5, 7] and found.images[:, 0].tolist() == [1, 2, 0]


def _train(task: ClipTask, epochs: int, lr: float = 1e-3) -> tuple[list[float], torch.nn.Module]:
    model = task.build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    means = []  # the first step's loss, then each epoch's mean
    for epoch in range(epochs):
        task.train_loader.set_epoch(epoch)
        losses = []
        for batch in task.train_batches():
            loss, rows = task.loss(model, batch)
            assert rows == len(batch["input_ids"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        means += losses[:1] if not means else []
        means.append(sum(losses) / len(losses))
    return means, model


def test_clip_task_learns_the_pairing_on_cpu(tmp_path):
    torch.manual_seed(0)
    config = TrainConfig(train=tmp_path, val=tmp_path, image_size=32, batch_size=16, channels_last=False)
    task = ClipTask(config, torch.device("cpu"), stand_in_factory(make_pairs(384), make_pairs(192, seed=1)),
                    towers=SMALL)
    untrained = task.evaluate(task.build_model())
    means, model = _train(task, epochs=3)
    metrics = task.evaluate(model)
    assert set(metrics) == {f"val_{name}" for name in ClipTask.val_metrics}
    chance = 1 / CLASSES  # one caption per class, every class about as frequent
    assert means[-1] < 0.4 * means[0], means
    assert metrics["val_i2t_r1"] > 0.85 and metrics["val_t2i_r1"] > 0.85, metrics
    assert untrained["val_i2t_r1"] < 4 * chance and untrained["val_t2i_r1"] < 4 * chance, untrained
    assert metrics["val_loss"] < untrained["val_loss"] - 1.0
    assert model.training  # evaluate() puts it back in training mode


def test_repeated_rows_are_left_out_of_the_loss(tmp_path):
    config = TrainConfig(train=tmp_path, image_size=32, batch_size=8, channels_last=False)
    task = ClipTask(config, torch.device("cpu"), stand_in_factory(make_pairs(8), None), towers=SMALL)
    model = task.build_model().eval()
    batch = next(iter(task.train_batches()))
    padded = {key: torch.cat([value, value[:2]]) for key, value in batch.items()}
    padded["repeated"] = torch.tensor([False] * 8 + [True] * 2)
    with torch.no_grad():
        assert task.loss(model, padded)[0].item() == pytest.approx(task.loss(model, batch)[0].item(), rel=1e-5)
        padded["repeated"][:] = False  # counted, the copies are each other's negatives: another loss
        assert task.loss(model, padded)[0].item() != pytest.approx(task.loss(model, batch)[0].item(), rel=1e-3)


def _trainer(pairs, tmp_path, *, resume: bool = False, out: str = "run") -> Trainer:
    """The real ``--task clip`` wiring: the pair loaders of ``dataio.train.pair_loaders`` over a pair folder."""
    return Trainer(TrainConfig(train=pairs, val=pairs, task="clip", out=tmp_path / out, image_size=32, batch_size=8,
                               epochs=2, optimizer="adamw", lr=3e-3, progress_every=0, resume=resume, num_workers=1,
                               context_length=24))


def test_the_trainer_runs_the_clip_task_on_a_pair_folder_and_resumes_it_to_the_same_weights(pair_tars, tmp_path,
                                                                                             capsys):
    whole_trainer = _trainer(pair_tars, tmp_path, out="whole")
    assert isinstance(whole_trainer.task, ClipTask) and whole_trainer.task.train_loader.pairs
    whole = whole_trainer.fit()
    assert {"val_i2t_r1", "val_i2t_r5", "val_t2i_r1", "val_t2i_r5", "val_loss"} <= set(whole)
    assert capsys.readouterr().out.count("val_t2i_r5=") == 3  # each epoch's line and the summary
    cut = _trainer(pair_tars, tmp_path, out="cut")
    calls = []

    def interrupt_at_step_7(model, batch):
        calls.append(1)
        if len(calls) == 7:  # as a Ctrl-C would, mid-way through the second epoch (5 steps an epoch)
            cut.signals.asked = signal.SIGINT
        return ClipTask.loss(cut.task, model, batch)

    cut.task.loss = interrupt_at_step_7
    with pytest.raises(TrainingInterrupted, match="interrupted at step 7"):
        cut.fit()
    resumed = _trainer(pair_tars, tmp_path, resume=True, out="cut")
    assert resumed.step == 7 and resumed.task.train_loader.epoch == 1
    resumed.fit()
    assert "resumed from step 7: epoch 2/2, 16 samples of it consumed" in capsys.readouterr().out
    final = {name: tensor for name, tensor in resumed.model.state_dict().items()}
    for name, tensor in _trainer(pair_tars, tmp_path, resume=True, out="whole").model.state_dict().items():
        assert torch.equal(tensor, final[name]), f"{name} differs after the resume"
