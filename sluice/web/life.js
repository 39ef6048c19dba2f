// A request's life on a canvas: its attempts along the time axis (each as long as its
// latency, coloured by outcome), the first token marked, the tokens over time, and
// where the client left. The log keeps no per-token times: the token line is the one
// this page sampled from the live feed while the request streamed, or a straight line
// from the first token to the end when it did not see it live (the note says which).

const INK = "#6b7684";
const OUTCOME_COLORS = Object.freeze({ ok: "#137333", served: "#137333", skipped: "#9aa3ad" });

/** Draws `record` with the live samples `[[ms since start, tokens], …]` seen of it. */
export function drawLife(canvas, note, record, samples) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 44, right: 12, top: 26, bottom: 22 };
  ctx.clearRect(0, 0, width, height);
  const end = Math.max(record.duration_ms || 0, ...samples.map(([t]) => t), 1);
  const x = (t) => pad.left + (t / end) * (width - pad.left - pad.right);
  const tokens = Math.max(record.completion_tokens, ...samples.map(([, n]) => n), 1);
  const y = (n) => height - pad.bottom - (n / tokens) * (height - pad.top - pad.bottom);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = INK;
  ctx.fillText(`${tokens} tok`, 2, pad.top + 4);
  ctx.fillText(`${Math.round(end)} ms`, width - 60, height - 6);
  ctx.fillText("0", pad.left - 10, height - 6);
  let start = 0;
  for (const attempt of record.attempts) {  // one after another, as the gateway tried them
    const length = attempt.latency_ms ?? 0;
    ctx.fillStyle = OUTCOME_COLORS[attempt.outcome] ?? "#b42318";
    ctx.fillRect(x(start), 4, Math.max(x(start + length) - x(start), 2), 10);
    start += length;
  }
  const line = samples.length ? [[0, 0], ...samples] : straight(record);
  ctx.strokeStyle = "#1f6feb";
  ctx.beginPath();
  line.forEach(([t, n], i) => (i ? ctx.lineTo(x(t), y(n)) : ctx.moveTo(x(t), y(n))));
  ctx.stroke();
  if (record.ttft_ms !== null) marker(ctx, x(record.ttft_ms), pad.top, height - pad.bottom, "#d97706", "first token");
  if (record.disconnect) marker(ctx, x(record.duration_ms), pad.top, height - pad.bottom, "#b42318", "client left");
  note.textContent = `${record.attempts.length} attempt${record.attempts.length === 1 ? "" : "s"}; tokens ${
    samples.length ? `as seen live (${samples.length} samples)` : "drawn straight from the first token to the end"}${
    record.disconnect ? `; the client left (${record.disconnect})` : ""}.`;
  canvas.dataset.samples = String(samples.length);
  canvas.dataset.attempts = String(record.attempts.length);
}

function straight(record) {
  const first = record.ttft_ms ?? record.duration_ms;
  return [[0, 0], [first, 0], [record.duration_ms, record.completion_tokens]];
}

function marker(ctx, x, top, bottom, color, label) {
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
  ctx.beginPath();
  ctx.moveTo(x, top);
  ctx.lineTo(x, bottom);
  ctx.stroke();
  ctx.fillText(label, Math.max(x - 30, 2), top - 2);
}
