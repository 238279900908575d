"""Text from a run's files (config names, evaluation results) made inert where it is shown.

A config.json, fid.json or ood.json is data a user (or anyone who handed over the workdir) may
have edited: in the model card or a report it must read as plain text, never as a heading, a
link, a table row or HTML.
"""
import math
import re

# Every ASCII punctuation mark that markdown (CommonMark, GFM tables and autolinks) gives a meaning.
_MARKUP = re.compile(r'([\\`*_{}\[\]()#+\-.!|~:/<>"\'=$%^&;@?,])')


def markdown(value, limit=200):
  """`value` as one line of inert inline markdown: control characters and line breaks become
  spaces, at most `limit` characters are kept, and every punctuation mark is backslash-escaped
  (so `<`, `&`, `#`, `[`, `|` and backticks are shown, not interpreted)."""
  text = ''.join(ch if ch.isprintable() else ' ' for ch in str(value))
  text = ' '.join(text.split())
  if len(text) > limit:
    text = text[:limit - 3] + '...'
  return _MARKUP.sub(r'\\\1', text)


def number(value, spec='.2f'):
  """A finite number formatted with `spec`, or '?' for anything else (a string, NaN, a list)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
    return '?'
  return format(value, spec)


def mean(values, spec='.2f'):
  """The mean of a non-empty list of finite numbers formatted with `spec`, else '?'."""
  if not isinstance(values, list) or not values or '?' in [number(v) for v in values]:
    return '?'
  return number(sum(values) / len(values), spec)
