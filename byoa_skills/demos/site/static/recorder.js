// AudioWorklet: hands every block of the first input channel to the page.
class ClipRecorder extends AudioWorkletProcessor {
  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) this.port.postMessage(channel.slice());
    return true;
  }
}
registerProcessor('clip-recorder', ClipRecorder);
