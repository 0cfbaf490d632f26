// Live events from the service's WebSocket (/api/v1/ws). Reconnects with backoff; after a reconnect the
// view is told to re-read its state over REST, since events sent while disconnected are not replayed.

const indicator = () => document.getElementById('live');

function setIndicator(state, text) {
  const el = indicator();
  if (!el) return;
  el.dataset.state = state;
  el.textContent = text;
}

export class Live {
  constructor(channels, onEvent) {
    this.channels = channels;
    this.onEvent = onEvent;
    this.closed = false;
    this.delay = 500;
    this.everOpened = false;
    this.connect();
  }

  connect() {
    const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
    const url = `${scheme}://${window.location.host}/api/v1/ws?channels=${encodeURIComponent(this.channels.join(','))}`;
    let ws;
    try {
      ws = new WebSocket(url);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.addEventListener('message', (msg) => {
      let event;
      try {
        event = JSON.parse(msg.data);
      } catch {
        return;
      }
      if (event.type === 'subscription.confirmed') {
        setIndicator('live', 'live');
        document.body.dataset.live = 'on';
        if (this.everOpened) this.onEvent({ type: 'reconnected' });
        this.everOpened = true;
        this.delay = 500;
        return;
      }
      this.onEvent(event);
    });
    ws.addEventListener('close', () => {
      document.body.dataset.live = 'off';
      if (!this.closed) this.retry();
    });
  }

  retry() {
    setIndicator('retry', 'reconnecting…');
    this.timer = window.setTimeout(() => this.connect(), this.delay);
    this.delay = Math.min(this.delay * 2, 10000);
  }

  close() {
    this.closed = true;
    window.clearTimeout(this.timer);
    if (this.ws) this.ws.close();
  }
}
