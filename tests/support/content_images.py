"""Synthetic, real-looking images of what surrounds a picture's content (written by Pillow and numpy; no real data):
a fundus disc on black, an endoscopy frame with a black border and burnt-in text, a CT slice with air around the
body and a table under it, a stained tissue field and a dark-field fluorescence field. Each comes with the true
content region it was drawn from, so a content estimate can be measured against it."""
from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def _noise(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return rng.normal(0, scale, shape)


def fundus(size: int = 512, seed: int = 0) -> tuple[Image.Image, np.ndarray]:
    """An orange retina disc (vessels, a bright optic disc, vignetting) on a near-black background with sensor noise,
    the disc cut by the top and bottom edges as fundus cameras often crop it."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    centre, radius = size / 2, size * 0.55
    distance = np.hypot(xx - centre, yy - centre)
    disc = distance <= radius
    shade = np.clip(1.0 - 0.45 * (distance / radius) ** 2, 0, 1)
    rgb = np.stack([200 * shade, 90 * shade, 30 * shade], axis=-1) + _noise(rng, (size, size, 3), 4)
    rgb[np.hypot(xx - size * 0.68, yy - centre) < size * 0.07] = (250, 220, 150)  # the optic disc
    picture = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(picture)
    for angle in np.linspace(0, 2 * np.pi, 9)[:-1]:  # vessels leaving the optic disc
        end = (size * 0.68 + np.cos(angle) * size * 0.45, centre + np.sin(angle) * size * 0.45)
        draw.line([(size * 0.68, centre), end], fill=(120, 30, 20), width=max(2, size // 120))
    pixels = np.asarray(picture).astype(float)
    pixels[~disc] = np.clip(2 + _noise(rng, (int((~disc).sum()), 3), 1.2), 0, 255)
    return Image.fromarray(pixels.astype(np.uint8), "RGB"), disc


def endoscopy(width: int = 640, height: int = 480, seed: int = 1) -> tuple[Image.Image, np.ndarray]:
    """Pink, textured mucosa inside an octagonal window, a black border around it with white burnt-in text."""
    rng = np.random.default_rng(seed)
    inset = width // 8
    octagon = [(inset, 0), (width - inset, 0), (width - 1, inset), (width - 1, height - inset),
               (width - inset, height - 1), (inset, height - 1), (0, height - inset), (0, inset)]
    inner = [(x * 0.86 + width * 0.07, y * 0.86 + height * 0.07) for x, y in octagon]
    window = Image.new("L", (width, height), 0)
    ImageDraw.Draw(window).polygon(inner, fill=255)
    region = np.asarray(window) > 0
    texture = np.asarray(Image.fromarray(rng.integers(0, 255, (height // 8, width // 8), dtype=np.uint8))
                         .resize((width, height), Image.Resampling.BICUBIC)).astype(float)
    rgb = np.stack([170 + 0.25 * texture, 90 + 0.2 * texture, 90 + 0.15 * texture], axis=-1)
    rgb += _noise(rng, rgb.shape, 5)
    rgb[~region] = np.clip(_noise(rng, (int((~region).sum()), 3), 2) + 3, 0, 255)
    picture = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(picture)
    draw.text((6, 4), "ID 0000  2024-01-01", fill=(255, 255, 255))
    draw.text((width - 90, height - 16), "WL  x1.0", fill=(255, 255, 255))
    return picture.filter(ImageFilter.GaussianBlur(0.6)), region


def ct_slice(size: int = 512, seed: int = 2) -> tuple[Image.Image, np.ndarray]:
    """A windowed axial CT slice: air clipped to 0 around an elliptical body (fat, muscle, two dark lungs, a bright
    spine) and a patient table below it, apart from the body."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    body = ((xx - size / 2) / (size * 0.42)) ** 2 + ((yy - size * 0.46) / (size * 0.32)) ** 2 <= 1
    values = np.where(body, 110.0, 0.0) + np.where(body, _noise(rng, (size, size), 8), 0)
    for side in (-1, 1):  # the lungs: air inside the body
        lung = ((xx - size / 2 - side * size * 0.17) / (size * 0.13)) ** 2 + ((yy - size * 0.42) / (size * 0.2)) ** 2 <= 1
        values[lung] = np.clip(_noise(rng, (int(lung.sum()),), 4) + 6, 0, 255)
    spine = np.hypot(xx - size / 2, yy - size * 0.68) < size * 0.05
    values[spine] = 240
    table = (yy > size * 0.86) & (yy < size * 0.88) & (np.abs(xx - size / 2) < size * 0.4)
    values[table] = 150
    return Image.fromarray(np.clip(values, 0, 255).astype(np.uint8), "L"), body


def tissue_field(size: int = 512, seed: int = 3) -> tuple[Image.Image, np.ndarray]:
    """A stained tissue field filling the picture: pink stroma with purple nuclei, no frame at all."""
    rng = np.random.default_rng(seed)
    rgb = np.empty((size, size, 3))
    rgb[...] = (232, 170, 200)
    rgb += _noise(rng, rgb.shape, 10)
    picture = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(picture)
    for x, y in rng.uniform(0, size, (180, 2)):
        r = rng.uniform(5, 10)
        draw.ellipse([x - r, y - r * 0.7, x + r, y + r * 0.7], fill=(90, 50, 140))
    return picture, np.ones((size, size), bool)


def fluorescence_field(size: int = 512, seed: int = 4, nuclei: int = 110) -> tuple[Image.Image, np.ndarray, list[list[int]]]:
    """A dark-field fluorescence micrograph: a noisy near-black field crowded with bright nuclei. The whole field is
    content (the nuclei sit on it). Returns the image, the true content and each nucleus's box."""
    rng = np.random.default_rng(seed)
    values = np.clip(14 + _noise(rng, (size, size), 5), 0, 255)
    picture = Image.fromarray(values.astype(np.uint8), "L")
    draw = ImageDraw.Draw(picture)
    boxes = []
    for x, y in rng.uniform(12, size - 12, (nuclei, 2)):
        rx, ry = rng.uniform(7, 12), rng.uniform(5, 9)
        draw.ellipse([x - rx, y - ry, x + rx, y + ry], fill=int(rng.uniform(90, 220)))
        boxes.append([int(x - rx), int(y - ry), int(np.ceil(x + rx)) + 1, int(np.ceil(y + ry)) + 1])
    return picture.filter(ImageFilter.GaussianBlur(1.0)), np.ones((size, size), bool), boxes
