const LIMIT_MB = @LIMIT@, TEMPLATE = @TEMPLATE@;
const BOXES = {'inspect-upload': '#inspect-status', 'inspect-pool-upload': '#inspect-pool-status'};
function guard(ev, files) {
  const box = ev.target.closest && ev.target.closest('#inspect-upload, #inspect-pool-upload');
  const big = box && [...(files || [])].find(f => f.size > LIMIT_MB * 1e6);
  if (!big) return;
  ev.stopImmediatePropagation(); ev.preventDefault();
  if (ev.target.value) ev.target.value = '';
  const out = document.querySelector(BOXES[box.id]);
  const at = out.querySelector('.ss-status') ? out.querySelector('.ss-status').parentElement : out;
  at.innerHTML = TEMPLATE;
  at.querySelector('.ss-status-detail').textContent =
    `recording too large: ${(big.size / 1e6).toFixed(1)} MB (the limit is ${LIMIT_MB} MB)`;
}
for (const kind of ['change', 'input']) {
  document.addEventListener(kind, ev => ev.target.type === 'file' && guard(ev, ev.target.files), true);
}
document.addEventListener('drop', ev => guard(ev, ev.dataTransfer && ev.dataTransfer.files), true);
