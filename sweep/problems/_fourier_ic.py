"""APEBench's ``fourier`` initial states: exponax 0.1's random truncated Fourier series.

APEBench (pinned to ``exponax==0.1.0``) draws most of its scenarios' initial states with
``exponax.ic.RandomTruncatedFourierSeries`` of exponax 0.1: every Fourier mode up to ``cutoff``
along each axis gets a uniform amplitude in ``amplitude_range`` and a uniform phase in
``angle_range``. exponax 0.2 replaced it with low-pass filtered white noise, whose modes have
other amplitudes: on 32 x 32 points with ``cutoff=5``, 6.7% of the energy lies in the wavenumbers
1 <= |k| < 2 against 10.1% for exponax 0.1's (600 states each), so the states of 0.2 decay faster
under diffusion than APEBench's. ``problem.ic = "fourier"`` is therefore this port of 0.1's
generator, on exponax 0.2's spectral helpers (``exponax.spectral``, unchanged between the two); it
draws the same states from the same key as exponax 0.1 (``tests/test_scenarios.py``).
"""

from __future__ import annotations

import math

from .._caches import cached


@cached(maxsize=4)
def fourier_series(ex):
    """The generator class, made on first use (an ``exponax.ic.BaseRandomICGenerator``, so that
    exponax's clamping and multi-channel generators take it), for the exponax module ``ex``."""
    import jax.numpy as jnp
    import jax.random as jr

    spectral = ex.spectral

    class RandomTruncatedFourierSeries(ex.ic.BaseRandomICGenerator):
        """exponax 0.1's ``RandomTruncatedFourierSeries`` (see the module's docstring)."""

        cutoff: int
        amplitude_range: tuple[float, float]
        angle_range: tuple[float, float]
        offset_range: tuple[float, float]
        std_one: bool
        max_one: bool

        def __init__(
            self,
            num_spatial_dims: int,
            *,
            cutoff: int = 5,
            amplitude_range: tuple[float, float] = (-1.0, 1.0),
            angle_range: tuple[float, float] = (0.0, 2.0 * math.pi),
            offset_range: tuple[float, float] = (0.0, 0.0),
            std_one: bool = False,
            max_one: bool = False,
        ):
            if std_one and max_one:
                raise ValueError("std_one=True and max_one=True exclude each other; choose one")
            if std_one and tuple(offset_range) != (0.0, 0.0):
                raise ValueError("std_one=True needs offset_range=(0, 0): a state's offset would be scaled too")
            self.num_spatial_dims = num_spatial_dims
            self.cutoff = cutoff
            self.amplitude_range = (float(amplitude_range[0]), float(amplitude_range[1]))
            self.angle_range = (float(angle_range[0]), float(angle_range[1]))
            self.offset_range = (float(offset_range[0]), float(offset_range[1]))
            self.std_one = std_one
            self.max_one = max_one

        def __call__(self, num_points: int, *, key):
            d = self.num_spatial_dims
            shape = (1,) + spectral.wavenumber_shape(d, num_points)
            amplitude_key, angle_key, offset_key = jr.split(key, 3)
            amplitude = jr.uniform(amplitude_key, shape, minval=self.amplitude_range[0], maxval=self.amplitude_range[1])
            angle = jr.uniform(angle_key, shape, minval=self.angle_range[0], maxval=self.angle_range[1])
            noise = amplitude * jnp.exp(1j * angle)
            noise = noise * spectral.low_pass_filter_mask(d, num_points, cutoff=self.cutoff, axis_separate=True)
            offset = jr.uniform(offset_key, (1,), minval=self.offset_range[0], maxval=self.offset_range[1])[0]
            noise = noise.flatten().at[0].set(offset).reshape(shape)
            noise = noise * spectral.build_scaling_array(d, num_points, mode="coef_extraction")
            u = spectral.ifft(noise, num_spatial_dims=d, num_points=num_points)
            if self.std_one:
                u = u / jnp.std(u)
            if self.max_one:
                u = u / jnp.max(jnp.abs(u))
            return u

    return RandomTruncatedFourierSeries
