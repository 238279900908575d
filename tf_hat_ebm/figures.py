"""Figures for people: labelled sample grids, the Langevin path, training curves, energy histograms.

Every function draws with matplotlib's Agg canvas (no display, no global pyplot state), writes one
PNG and returns its metadata, read back from the drawn figure: pixel size, title, panel labels and,
for residual panels, the symmetric scale Y was shown on. Images are in [-1, 1]; a residual Y is
shown on [-s, s] with s = max |Y| of that figure, so nothing clips and grey is Y = 0.
"""
import io
import math
import os

import matplotlib
from matplotlib import figure as figure_lib
from matplotlib.backends import backend_agg
import numpy as np
import tensorflow as tf

from tf_hat_ebm import files

matplotlib.use('Agg')

MIN_TILE = 48   # pixels per tile at least: a 16x16 digit is upscaled 3x
DPI = 100
TITLE_PX, LABEL_PX, MARGIN_PX = 34, 22, 8
GAP_PX = 12     # between panels


def upscale(images, min_tile=MIN_TILE):
  """[n, h, w, c] -> the same upscaled by an integer factor (nearest) to tiles >= min_tile px."""
  factor = max(1, math.ceil(min_tile / images.shape[1]))
  return np.repeat(np.repeat(images, factor, axis=1), factor, axis=2)


def symmetric_scale(residuals):
  """The half-range s of a residual panel: max |Y| (never 0), so Y / s is in [-1, 1]."""
  return max(float(np.max(np.abs(residuals))) if np.size(residuals) else 0.0, 1e-12)


def tiles(images, columns=None, pad=1, fill=1.0):
  """[n, h, w, c] floats -> one [H, W, c] grid (row-major, `pad` px of `fill` between tiles)."""
  images = np.asarray(images, np.float32)
  n, h, w, c = images.shape
  columns = columns or int(math.ceil(math.sqrt(n)))
  rows = int(math.ceil(n / columns))
  out = np.full([rows * (h + pad) + pad, columns * (w + pad) + pad, c], fill, np.float32)
  for i, image in enumerate(images):
    r, col = divmod(i, columns)
    out[pad + r * (h + pad):pad + r * (h + pad) + h,
        pad + col * (w + pad):pad + col * (w + pad) + w] = image
  return out


def _to_display(images, kind, scale=None):
  """Images in [-1, 1] (or residuals on [-scale, scale]) -> floats in [0, 1] for imshow."""
  x = np.asarray(images, np.float32)
  if kind == 'residual':
    x = x / scale
  return np.clip((x + 1.0) / 2.0, 0.0, 1.0)


def _show(ax, image):
  if image.shape[-1] == 1:
    ax.imshow(image[..., 0], cmap='gray', vmin=0.0, vmax=1.0, interpolation='nearest')
  else:
    ax.imshow(image, interpolation='nearest')
  ax.set_xticks([])
  ax.set_yticks([])
  for spine in ax.spines.values():
    spine.set_visible(False)


def _new_figure(width_px, height_px):
  fig = figure_lib.Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
  backend_agg.FigureCanvasAgg(fig)
  return fig


def _shorten_paths(text):
  """Path-like words of `text` cut to their last component: 'step 3 of /a/b/run' -> '.../run'."""
  words = []
  for word in text.split(' '):
    stripped = word.rstrip(',;:')
    parts = [p for p in stripped.split('/') if p]
    words.append('\u2026/' + parts[-1] + word[len(stripped):]
                 if '/' in stripped and len(parts) > 1 else word)
  return ' '.join(words)


def _title(fig, text, y, fontsize=12, weight='bold'):
  """A one-line title centred at height fraction y that fits the figure: long paths are cut to
  their last component, then the font shrinks to 8 pt, then the middle is elided."""
  artist = fig.text(0.5, y, text, ha='center', va='center', fontsize=fontsize, weight=weight)
  renderer = fig.canvas.get_renderer()
  room = fig.canvas.get_width_height()[0] - 2 * MARGIN_PX

  def fits():
    return artist.get_window_extent(renderer).width <= room

  if not fits():
    artist.set_text(_shorten_paths(text))
  while not fits() and artist.get_fontsize() > 8:
    artist.set_fontsize(artist.get_fontsize() - 1)
  shown = artist.get_text()
  while not fits() and len(shown) > 8:
    half = (len(shown) - 2) // 2
    shown = shown[:half] + '\u2026' + shown[-half:]
    artist.set_text(shown)
  return artist


def _save(fig, path):
  """Draws `fig` once, writes it as PNG to `path` (any tf.io.gfile path; None: not written) and
  returns its metadata."""
  buffer = io.BytesIO()
  fig.savefig(buffer, format='png', dpi=DPI)  # the only draw
  texts = [t.get_text() for t in fig.texts if t.get_text()]
  labels = [ax.get_title() for ax in fig.axes if ax.get_title()] or texts[1:]
  labels += [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()]
  labels += [ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()]
  width, height = fig.canvas.get_width_height()
  if path:
    directory = os.path.dirname(path)
    if directory:
      tf.io.gfile.makedirs(directory)
    if '://' in path:
      with tf.io.gfile.GFile(path, 'wb') as f:
        f.write(buffer.getvalue())
    else:  # whole or not at all: a figure is rewritten in place (training_curves.png)
      files.write_atomic(path, buffer.getvalue())
  return dict(path=path, size=(width, height), title=texts[0] if texts else '',
              texts=texts, labels=labels, png=buffer.getvalue())


def grid_figure(panels, title, path=None, columns=None):
  """Labelled panels of image grids side by side, one title above.

  panels: [(label, images [n, h, w, c] in [-1, 1], kind)] with kind 'image' or 'residual'; a
  residual panel is shown on [-s, s], s = max |Y| of that panel, and its label says s.
  Returns the metadata of `_save` plus 'y_scale' (s, or None without a residual panel),
  'clipped' (fraction of residual values outside [-s, s]: 0) and 'tile_px'.
  """
  shown, y_scale, clipped, tile_px, outside = [], None, 0.0, None, {}
  for label, images, kind in panels:
    images = np.asarray(images, np.float32)
    if kind == 'residual':
      y_scale = symmetric_scale(images)
      clipped = float(np.mean(np.abs(images) > y_scale))
      label = f'{label}   (shown on \u00b1{y_scale:.3g}, grey = 0)'
    else:
      outside[label] = out_of_range(images)
      label += clip_note(outside[label])
    big = upscale(images)
    tile_px = big.shape[1]
    grid = tiles(_to_display(big, kind, y_scale), columns=columns, pad=2)
    shown.append((label, np.repeat(grid, 3, axis=-1) if grid.shape[-1] == 1 else grid))
  heights = [image.shape[0] for _, image in shown]
  widths = [image.shape[1] for _, image in shown]
  width = sum(widths) + GAP_PX * (len(shown) - 1) + 2 * MARGIN_PX
  height = max(heights) + TITLE_PX + LABEL_PX + 2 * MARGIN_PX
  # The label of a residual panel is wider than a small grid: widen the figure to fit it.
  width = max(width, 9 * max(len(label) for label, _ in shown) + 2 * MARGIN_PX, 360)
  fig = _new_figure(width, height)
  _title(fig, title, 1 - (MARGIN_PX + TITLE_PX / 2) / height)
  left = (width - sum(widths) - GAP_PX * (len(shown) - 1)) / 2
  for (label, image), w, h in zip(shown, widths, heights):
    # Pixels placed as they are (no resampling): the tiles stay sharp and drawing stays fast.
    fig.figimage(image, xo=int(left), yo=MARGIN_PX, origin='upper')
    fig.text((left + w / 2) / width, (MARGIN_PX + h + LABEL_PX / 2) / height, label,
             ha='center', va='center', fontsize=10)
    left += w + GAP_PX
  meta = _save(fig, path)
  meta.update(y_scale=y_scale, clipped=clipped, tile_px=tile_px, outside=outside)
  return meta


def out_of_range(images):
  """The fraction of image values outside [-1, 1], which the figures show clipped (a generator
  with a 2 tanh output range reaches +-2)."""
  images = np.asarray(images, np.float32)
  return float(np.mean(np.abs(images) > 1.0)) if images.size else 0.0


def clip_note(fraction):
  """A label suffix that says values were clipped for display, or ''."""
  if fraction <= 0:
    return ''
  return f'   ({100 * fraction:.2g}% of values outside [-1, 1], shown clipped)'


# The arms of the paper's historical-generator-update figure (appendix), by
# training.generator_update, left to right, with the paper's captions.
HISTORICAL_ARMS = (('cooperative', 'Coop. (no batch norm)'),
                   ('cooperative_bn', 'Coop. (batch norm)'),
                   ('current', 'Hat EBM (current)'), ('bank', 'Hat EBM (historical)'))


def historical_figure(samples, path=None, updates=500, columns=None):
  """The paper's historical-generator-update figure: samples of the four arms after `updates`
  weight updates side by side. samples: {training.generator_update: images [n, h, w, c] in
  [-1, 1]} with the keys of HISTORICAL_ARMS (an arm that is missing, e.g. a failed run, is left
  out and named in the title). Returns grid_figure's metadata."""
  unknown = sorted(set(samples) - {arm for arm, _ in HISTORICAL_ARMS})
  if unknown or not samples:
    raise ValueError(f'historical_figure takes samples of {[a for a, _ in HISTORICAL_ARMS]}, '
                     f'not {unknown or "none"}')
  missing = [label for arm, label in HISTORICAL_ARMS if arm not in samples]
  title = f'Samples after {updates} weight updates'
  if missing:
    title += f' (no samples: {", ".join(missing)})'
  return grid_figure([(label, samples[arm], 'image') for arm, label in HISTORICAL_ARMS
                      if arm in samples], title, path, columns)


def path_figure(path, title, out=None, energies=None, num_chains=4):
  """The Langevin chain as columns of chain steps: per chain a row X and a row Y, and G(Z) once
  (left) where Z is fixed or as a row per step where the chain moves Z; the mean energy H(X)
  along the chain as a curve below when `energies` [steps, N] is given.

  path: `sample_path`'s output (numpy or tensors): images and residuals [steps, N, h, w, c],
  generator_images [N, h, w, c] (fixed Z) or [steps, N, h, w, c] (moving Z), steps [steps].
  """
  x, y = np.asarray(path['images']), np.asarray(path['residuals'])
  g_z, steps = np.asarray(path['generator_images']), [int(s) for s in np.asarray(path['steps'])]
  moving = g_z.ndim == 5
  n = min(x.shape[1], num_chains)
  y_scale = symmetric_scale(y[:, :n])
  rows = []  # (label, [tile or None per column]); column 0 holds a fixed G(Z)
  for i in range(n):
    if moving:
      rows.append((f'G(Z) #{i + 1}', [None] + [g_z[k, i] for k in range(len(steps))]))
      rows.append((f'X #{i + 1}', [None] + [x[k, i] for k in range(len(steps))]))
    else:
      rows.append((f'X #{i + 1}', [g_z[i]] + [x[k, i] for k in range(len(steps))]))
    rows.append((f'Y #{i + 1}', [None] + [('residual', y[k, i]) for k in range(len(steps))]))
  h = upscale(x[:1, 0]).shape[1]
  cell, label_w = h + 6, 70
  columns = len(steps) + (0 if moving else 1)
  curve_px = 190 if energies is not None else 0
  width = max(label_w + columns * cell + 2 * MARGIN_PX, 460)
  height = TITLE_PX + 2 * LABEL_PX + len(rows) * cell + curve_px + 2 * MARGIN_PX + 20
  fig = _new_figure(width, height)
  _title(fig, title, 1 - (MARGIN_PX + TITLE_PX / 2) / height)
  outside = out_of_range(g_z[:, :n] if moving else g_z[:n])
  _title(fig, f'X = G(Z) + Y; Y shown on \u00b1{y_scale:.3g} (grey = 0); columns: chain steps'
         + (f'; G(Z): {100 * outside:.2g}% outside [-1, 1], shown clipped' if outside else ''),
         1 - (MARGIN_PX + TITLE_PX + LABEL_PX / 2) / height, fontsize=9, weight='normal')
  top = height - MARGIN_PX - TITLE_PX - LABEL_PX
  x0 = MARGIN_PX + label_w + (width - 2 * MARGIN_PX - label_w - columns * cell) / 2
  offset = 0 if moving else 1
  for r, (label, cells) in enumerate(rows):
    y0 = top - LABEL_PX - (r + 1) * cell
    fig.text((x0 - 6) / width, (y0 + cell / 2) / height, label, ha='right', va='center',
             fontsize=9)
    for c, tile in enumerate(cells[1 - offset:] if moving else cells):
      if tile is None:
        continue
      kind, image = tile if isinstance(tile, tuple) else ('image', tile)
      ax = fig.add_axes([(x0 + c * cell + 3) / width, (y0 + 3) / height, h / width, h / height])
      _show(ax, _to_display(upscale(image[None])[0], kind, y_scale))
      if r == 0:
        ax.set_title('G(Z)' if (c == 0 and not moving) else f'step {steps[c - offset]}',
                     fontsize=8, pad=3)
  if energies is not None:
    energies = np.asarray(energies, np.float64)[:, :n]
    ax = fig.add_axes([(x0 + offset * cell) / width, (MARGIN_PX + 36) / height,
                       (len(steps) * cell) / width, (curve_px - 50) / height])
    ax.plot(steps, energies.mean(axis=1), marker='o', color='tab:blue', label='mean H(X)')
    ax.set_xlabel('chain step')
    ax.set_ylabel('mean H(X)')
    ax.tick_params(labelsize=8)
    ax.set_xlim(steps[0] - 0.5, steps[-1] + 0.5)
  meta = _save(fig, out)
  meta.update(y_scale=y_scale, clipped=float(np.mean(np.abs(y[:, :n]) > y_scale)),
              tile_px=h, steps=steps, rows=[label for label, _ in rows], g_z_outside=outside)
  return meta


# The panels of sample grids, one table for the training grids and the sample files: (file name,
# key in a task's grids, key in an exported module's output, label, kind, heading).
SAMPLE_PANELS = (('samples', 'x', 'images', 'X = G(Z) + Y', 'image', 'Hat EBM samples'),
                 ('generator', 'g_z', 'generator_images', 'G(Z)', 'image', 'the generator alone'),
                 ('residual', 'y', 'residuals', 'Y', 'residual', 'the residual the chain adds'))

# Panels of the training curves: (title, [(metric, legend)], log scale).
CURVE_PANELS = (
    ('energy difference mean H(X+) - mean H(X-) (= EBM loss x T)',
     [('energy_diff', 'H(X+) - H(X-)')], False),
    ('energies', [('energy_pos', 'data H(X+)'), ('energy_neg', 'samples H(X-)')], False),
    ('losses', [('gen_loss', 'generator'),
                ('disc_loss', 'discriminator'), ('loss', 'loss'), ('mse', 'MSE')], False),
    ('gradient norms', [('hat_grad_norm', 'hat H'), ('gen_grad_norm', 'generator G'),
                        ('disc_grad_norm', 'discriminator D'), ('grad_norm', 'network'),
                        ('residual_grad_norm', 'chain dH/dY'),
                        ('latent_grad_norm', 'chain dH/dZ')], True),
    ('learning rates', [('hat_lr', 'hat'), ('gen_lr', 'generator'), ('disc_lr', 'discriminator'),
                        ('enc_lr', 'encoder'), ('dec_lr', 'decoder')], True),
    ('divergence guard', [('guard_count', 'runaway checks in a row'),
                          ('rollbacks', 'rollbacks')], False),
)


# (line style, marker) of the 1st, 2nd, ... curve of a panel.
LINE_STYLES = (('-', 'o'), ('--', 's'), (':', '^'), ('-.', 'D'), ((0, (5, 1, 1, 1)), 'v'),
               ((0, (1, 3)), 'x'))


def training_curves(series, title, path=None):
  """One PNG of the training curves: series {metric name: [(step, value)]}; panels without data
  are left out. Returns `_save`'s metadata plus 'panels'."""
  panels = [(name, [(k, legend) for k, legend in curves if series.get(k)], log)
            for name, curves, log in CURVE_PANELS]
  panels = [p for p in panels if p[1]]
  columns = 2
  rows = max(1, math.ceil(len(panels) / columns))
  row_px = 290
  fig = _new_figure(1100, 60 + row_px * rows)
  _title(fig, title, 1 - 22 / (60 + row_px * rows))
  axes = []
  for i, (name, curves, log) in enumerate(panels):
    ax = fig.add_subplot(rows, columns, i + 1)
    for j, (key, legend) in enumerate(curves):
      steps, values = zip(*series[key])
      values = np.asarray(values, np.float64)
      if log and np.all(values > 0):
        ax.set_yscale('log')
        ax.minorticks_off()  # minor ticks of log axes cost most of the drawing time
      # Own line style and sparse markers: curves that coincide (two zero counts) stay visible.
      # Markers staggered between curves, so the one drawn last does not hide the others'.
      style, every = LINE_STYLES[j % len(LINE_STYLES)], max(1, len(steps) // 8)
      ax.plot(steps, values, label=legend, linewidth=1.2 + 0.6 * (len(curves) - 1 - j),
              linestyle=style[0], marker=style[1], markersize=4,
              markevery=(j * every // len(curves), every), alpha=0.9)
    ax.set_title(name, fontsize=10)
    ax.set_xlabel('training step', fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    # Below the axes, never over the data (the newest points are at the right edge).
    ax.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.17),
              ncol=min(len(curves), 3), frameon=False)
    axes.append(ax)
  fig.subplots_adjust(top=1 - 50 / (60 + row_px * rows), hspace=0.75, wspace=0.2, left=0.07,
                      right=0.98, bottom=0.16 if rows == 1 else 0.09)
  meta = _save(fig, path)
  meta['panels'] = [name for name, _, _ in panels]
  renderer = fig.canvas.get_renderer()
  meta['legends_over_data'] = sum(
      ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
      for ax in axes if ax.get_legend() is not None)
  return meta


def energy_histograms(energies, title, path=None, reference=None, notes=None):
  """Overlaid histograms of H(x) per set: energies {label: [n]}; `reference` names the set the
  others are compared with (drawn first, filled); notes {label: text} go into the legend."""
  rows = math.ceil(len(energies) / 2)
  height = 400 + 22 * rows
  fig = _new_figure(820, height)
  ax = fig.add_axes([0.09, (70 + 22 * rows) / height, 0.88, 1 - (125 + 22 * rows) / height])
  values = np.concatenate([np.asarray(v, np.float64).ravel() for v in energies.values()])
  values = values[np.isfinite(values)]
  bins = np.linspace(values.min(), values.max() + 1e-12, 50) if values.size else 10
  order = sorted(energies, key=lambda k: k != reference)
  for label in order:
    e = np.asarray(energies[label], np.float64).ravel()
    note = f', {notes[label]}' if notes and label in notes else ''
    ax.hist(e[np.isfinite(e)], bins=bins, density=True, alpha=0.45 if label == reference else 1.0,
            histtype='stepfilled' if label == reference else 'step', linewidth=1.4,
            label=f'{label} (n={len(e)}, mean {np.mean(e):.3g}{note})')
  ax.set_xlabel('energy H(x) (lower = more like the data)')
  ax.set_ylabel('density')
  # Below the axes: a legend inside would hide the histograms.
  ax.legend(fontsize=8, loc='upper center', ncol=2, bbox_to_anchor=(0.5, -0.13), frameon=False)
  ax.tick_params(labelsize=8)
  _title(fig, title, 1 - 25 / height)
  return _save(fig, path)


def montage(panels, title, path=None):
  """Figures already drawn, side by side under one title, each labelled: panels [(label, PNG
  path or bytes)] (e.g. the training grids of each ablation arm at one step, or each baseline's
  grid beside the Hat EBM's). Missing files are an error naming them. Returns `_save`'s metadata.
  """
  images = []
  for label, source in panels:
    if isinstance(source, str):
      if not tf.io.gfile.exists(source):
        raise FileNotFoundError(f'montage panel {label!r}: no figure at {source}')
      with tf.io.gfile.GFile(source, 'rb') as f:
        source = f.read()
    images.append((label, tf.io.decode_png(source, channels=4).numpy()))
  widths = [image.shape[1] for _, image in images]
  heights = [image.shape[0] for _, image in images]
  width = max(sum(widths) + GAP_PX * (len(images) - 1) + 2 * MARGIN_PX, 360)
  height = max(heights) + TITLE_PX + LABEL_PX + 2 * MARGIN_PX
  fig = _new_figure(width, height)
  _title(fig, title, 1 - (MARGIN_PX + TITLE_PX / 2) / height)
  left = (width - sum(widths) - GAP_PX * (len(images) - 1)) / 2
  for (label, image), w, h in zip(images, widths, heights):
    fig.figimage(image, xo=int(left), yo=MARGIN_PX + max(heights) - h, origin='upper')
    fig.text((left + w / 2) / width, (MARGIN_PX + max(heights) + LABEL_PX / 2) / height, label,
             ha='center', va='center', fontsize=10)
    left += w + GAP_PX
  meta = _save(fig, path)
  meta['panels'] = [label for label, _ in images]
  return meta


def decode(meta):
  """The figure's PNG as a uint8 [H, W, 4] array (for tf.summary.image)."""
  return tf.io.decode_png(meta['png'], channels=4).numpy()


def stack(images):
  """RGBA images one above the other, centred on white."""
  width = max(p.shape[1] for p in images)
  rows = []
  for p in images:
    left = (width - p.shape[1]) // 2
    row = np.full([p.shape[0], width, 4], 255, np.uint8)
    row[:, left:left + p.shape[1]] = p
    rows.append(row)
  return np.concatenate(rows)
