"""ViewsConfig, ViewRecipe and ViewsLoader's keywords: values that pass the checks and fail (or do nothing) later."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import dataio
from dataio.augment.view_params import ViewRecipe
from dataio.errors import ConfigError, DataioError

PLAIN = ViewRecipe(jitter=0.0, grayscale=0.0, blur=0.0, solarize=0.0)
SMALL = dict(global_size=32, local_size=16, local_crops=2)


def _batch(folder, views=None, **options):
    views = views or dataio.ViewsConfig(global_recipes=(PLAIN,), local_recipe=PLAIN, **SMALL)
    with dataio.ViewsLoader(folder, views=views, batch_size=8, seed=0, num_workers=1, **options) as loader:
        return next(iter(loader))


# Class 5 (flags accepted and ignored): ViewsLoader takes ImageLoader's crop keywords and does nothing with them:
# hflip=0.0 still flips every other view (ViewsConfig.hflip rules), image_size=64 still gives 32 px views, crop_scale,
# crop_ratio and val_crop_ratio change nothing. The batches are bit-identical to the defaults'. Like randaugment and
# mix (REFUSED in view_batches.py), they should be refused in one line pointing at ViewsConfig.
@pytest.mark.parametrize("option", [dict(hflip=0.0), dict(image_size=64), dict(crop_scale=(0.9, 1.0)),
                                    dict(crop_ratio=(1.0, 1.0)), dict(val_crop_ratio=0.5)],
                         ids=lambda o: next(iter(o)))
def test_views_loader_refuses_image_crop_options_it_ignores(views_shards, option):
    name = next(iter(option))
    try:
        given = _batch(views_shards, **option)
    except ConfigError as e:
        assert name in str(e)
        return
    default = _batch(views_shards)
    same = all(torch.equal(given[k], default[k]) for k in ("collated_global_crops", "collated_local_crops"))
    assert not same, f"ViewsLoader({name}={option[name]!r}) was accepted and changed nothing"


# Class 2/8: ViewRecipe accepts strengths and sigmas whose draws leave float32 (brightness=1e308 -> inf, sigma 1e-300
# -> 0, sigma 1e308 -> inf) or the kernel's range (contrast 1e30); the loader then fails at its first batch with
# "ViewParams.factors: ... must be finite" / "values must be finite, at most 1e6 in magnitude", naming no option.
# The recipe should refuse them naming the field (or the loader should work).
@pytest.mark.parametrize("field, value", [("brightness", 1e308), ("contrast", 1e30), ("saturation", 1e39),
                                          ("blur_sigma", (1e-300, 1e-300)), ("blur_sigma", (1.0, 1e308))])
def test_a_recipe_past_float32_is_refused_where_it_is_made(views_shards, field, value):
    try:
        recipe = ViewRecipe(blur=1.0, **{field: value})
    except ConfigError as e:
        assert field in str(e)
        return
    batch = _batch(views_shards, views=dataio.ViewsConfig(local_recipe=recipe, **SMALL), normalize=True)
    assert bool(torch.isfinite(batch["collated_local_crops"]).all())


# Class 8: a blur kernel wider than its view (local_size=8 with blur_kernel=31, both known when the config is made)
# is accepted by ViewsConfig; the first batch then raises "images too small for the blur kernel (each side >
# kernel // 2)" from the C kernel, naming neither option.
def test_a_blur_kernel_wider_than_its_view_is_refused_by_the_config(views_shards):
    recipe = ViewRecipe(blur=1.0, blur_kernel=31)
    try:
        config = dataio.ViewsConfig(global_size=32, local_size=8, local_crops=2, local_recipe=recipe)
    except ConfigError as e:
        assert "local_size" in str(e) or "blur_kernel" in str(e)
        return
    _batch(views_shards, views=config)  # or the views are made


def _bounded(script: str, limit_gb: float, timeout: float) -> subprocess.CompletedProcess:
    """``script`` under an address-space limit of ``limit_gb`` GB (resource.setrlimit), at most ``timeout`` s."""
    prelude = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({int(limit_gb * 2**30)}, "
               f"{int(limit_gb * 2**30)}))\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout)


# Class 2 (sizes with no bound): ViewsConfig(global_size=100000) (or local_size) is accepted; the first batch asks
# for 2 x 8 x 3 x 100000^2 float32 and fails with a bare "OSError: [Errno 12] Cannot allocate memory" (under
# prlimit --as; on a big machine it pages towards the OOM killer). The size should be bounded or the batch's bytes
# checked, refused in one line naming the option.
@pytest.mark.parametrize("option", ["global_size=100_000", "local_size=100_000"])
def test_a_view_size_without_bound_is_refused_in_one_line(views_shards, option):
    result = _bounded(f"""
        import dataio
        from dataio.errors import DataioError
        try:
            loader = dataio.ViewsLoader({str(views_shards)!r}, views=dataio.ViewsConfig({option}), batch_size=8,
                                        num_workers=1)
            next(iter(loader))
            print("MADE")
        except DataioError as e:
            print("REFUSED", e)
        except BaseException as e:
            print("OTHER", type(e).__name__, e)
        """, limit_gb=3, timeout=60)
    out = result.stdout.strip()
    assert out.startswith("REFUSED") and option.split("=")[0] in out, out or result.stderr[-2000:]


# Class 2: ViewsConfig(local_crops=10**6) is accepted; the first batch draws a million boxes one view at a time
# (212 s here) before the allocation fails with the same bare ENOMEM. A count this size should be refused at once.
def test_a_local_crop_count_without_bound_is_refused_at_once(views_shards):
    try:
        result = _bounded(f"""
            import dataio
            from dataio.errors import DataioError
            try:
                loader = dataio.ViewsLoader({str(views_shards)!r}, views=dataio.ViewsConfig(local_crops=10**6),
                                            batch_size=4, num_workers=1)
                next(iter(loader))
                print("MADE")
            except DataioError as e:
                print("REFUSED", e)
            except BaseException as e:
                print("OTHER", type(e).__name__, e)
            """, limit_gb=3, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("ViewsConfig(local_crops=10**6): neither refused nor done after 20 s")
    out = result.stdout.strip()
    assert out.startswith("REFUSED") and "local_crops" in out, out or result.stderr[-2000:]


# Class 8: a negative seed is accepted by the loader, then its first batch raises numpy's "expected non-negative
# integer", naming no option.
def test_a_negative_seed_is_named(views_shards):
    with pytest.raises((DataioError, ValueError)) as caught:
        with dataio.ViewsLoader(views_shards, views=dataio.ViewsConfig(**SMALL), seed=-1, batch_size=4) as loader:
            next(iter(loader))
    assert "seed" in str(caught.value), str(caught.value)
