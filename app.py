"""SpecScope app entry (the UI is being built; this placeholder starts a page)."""
import gradio as gr

with gr.Blocks(title="SpecScope") as demo:
    gr.Markdown("# SpecScope\nThe live debugging UI is coming.")

if __name__ == "__main__":
    demo.launch()
