//! `cargo run --release -p raspc-lm --example smoke -- MODEL.gguf`: perplexity of a paragraph and
//! a greedy continuation, to see that the model is a working language model.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: smoke MODEL.gguf")?;
    let t = std::time::Instant::now();
    let lm = raspc_lm::LanguageModel::load(std::path::Path::new(&path))?;
    println!("loaded {:?} in {:.1?}", lm.config, t.elapsed());
    let text = "The compiler reads a program, checks it, and turns every step into the weights of a small network. Each layer of the network does one part of the work, and the last layer writes the answer.";
    let ids = lm.encode(text)?;
    let t = std::time::Instant::now();
    let nll = lm.nll(&ids)?;
    println!("{} tokens, NLL {nll:.3}, perplexity {:.1} ({:.1?})", ids.len(), nll.exp(), t.elapsed());
    let prompt = lm.encode("The capital of France is")?;
    let out = lm.greedy(&prompt, 12)?;
    println!("{:?}", lm.decode(&out)?);
    Ok(())
}
